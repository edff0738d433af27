"""utils/monitor.py: statistics, warm-up exclusion and the performance block on synthetic timings."""

from __future__ import annotations

import pytest

from utils.models import flops_per_token, get_shape
from utils.monitor import StepMonitor, framework_disagreement, memory_block, performance_block, summarize


def test_summary_statistics_hand_computed():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert stats["mean"] == 3.0 and stats["median"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 5.0
    assert stats["std"] == pytest.approx(1.5811388, rel=1e-6)  # sample std of 1..5
    assert stats["p5"] == pytest.approx(1.2) and stats["p95"] == pytest.approx(4.8)
    assert stats["count"] == 5
    assert summarize([]) is None
    assert summarize([2.0])["std"] == 0.0


def test_warmup_steps_are_kept_in_arrays_but_excluded_from_statistics():
    times = [9.0, 7.0, 1.0, 1.0, 1.2, 0.8]
    shape = get_shape("llama", "full")
    block = performance_block(times, skip_steps=2, global_batch_size=64, seq_len=2048, world_size=8, shape=shape,
                              peak_tflops=989.4, peak_reason=None)
    assert block["measured_steps"] == 4 and block["skipped_steps"] == 2
    assert block["step_time_seconds"]["max"] == 1.2 and block["median_step_time_seconds"] == 1.0
    assert block["tokens_per_second"] == 64 * 2048 and block["tokens_per_second_per_gpu"] == 64 * 2048 / 8
    flops = flops_per_token(shape, 2048)
    assert block["tflops_per_gpu"]["full"] == pytest.approx(16384 * flops.full / 1e12)
    assert block["mfu"]["full"] == pytest.approx(16384 * flops.full / 989.4e12)
    assert block["mfu"]["causal"] < block["mfu"]["full"]
    assert block["mfu_reason"] is None


def test_no_measured_steps_gives_nulls_with_reason():
    block = performance_block([1.0, 1.0], skip_steps=2, global_batch_size=8, seq_len=128, world_size=1,
                              shape=get_shape("qwen", "tiny", 512), peak_tflops=None, peak_reason="cpu")
    assert block["tokens_per_second"] is None and block["mfu"] is None
    assert "no measured steps" in block["mfu_reason"]


def test_step_monitor_with_a_fake_clock():
    ticks = iter([0.0, 0.5, 1.0, 1.25])
    monitor = StepMonitor(clock=lambda: next(ticks))
    monitor.start_step()
    monitor.end_step(loss=2.0, lr=1e-3)
    monitor.start_step()
    monitor.end_step(loss=float("nan"), lr=1e-3)
    arrays = monitor.arrays()
    assert arrays["step_times"] == [0.5, 0.25]
    assert arrays["loss_values"] == [2.0, None]  # NaN is recorded as null, never as a number
    assert arrays["memory_allocated_gb"] == [None, None]
    with pytest.raises(RuntimeError):
        monitor.end_step()


def test_memory_block_reason_on_cpu():
    assert memory_block([None, None], reason="cpu: not measured")["reason"] == "cpu: not measured"
    block = memory_block([1.0, 3.0])
    assert block["avg_allocated_gb"] == 2.0 and block["peak_allocated_gb"] == 3.0 and block["reason"] is None


def test_framework_disagreement_flag():
    assert framework_disagreement(100.0, 104.0, "tflops")["flagged"] is False
    flagged = framework_disagreement(100.0, 110.0, "tflops")
    assert flagged["flagged"] is True and flagged["relative_gap"] == pytest.approx(0.10)
    assert framework_disagreement(None, 1.0, "tflops") is None
