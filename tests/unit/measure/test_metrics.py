"""utils/measure/metrics.py: statistics, warm-up exclusion, throughput/MFU, memory, framework figures, known inputs."""

from __future__ import annotations

import pytest

from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.machine.hardware import gpu_info_for_device
from utils.measure.metrics import disagreement, framework_reported, memory_metrics, performance_metrics, step_stats
from utils.result.file import new_result
from utils.result.step_log import record_steps
from utils.schema.measures import Source
from utils.spec.models import flops_per_token, get_shape


def test_summary_statistics_hand_computed():
    stats = step_stats([4.0, 1.0, 3.0, 2.0, 5.0])
    assert stats.mean == 3.0 and stats.median == 3.0 and stats.min == 1.0 and stats.max == 5.0
    assert stats.std == pytest.approx(1.5811388, rel=1e-6)  # sample std of 1..5
    assert stats.p5 == pytest.approx(1.2) and stats.p95 == pytest.approx(4.8)
    assert stats.count == 5
    assert step_stats([]) is None
    assert step_stats([2.0]).std == 0.0


def test_warmup_steps_are_kept_in_arrays_but_excluded_from_statistics():
    times = [9.0, 7.0, 1.0, 1.0, 1.2, 0.8]
    shape = get_shape("llama", "full")
    block = performance_metrics(times, skip_steps=2, global_batch_size=64, seq_len=2048, world_size=8, shape=shape,
                                peak_tflops=989.4, peak_reason=None)
    assert block.measured_steps == 4 and block.skipped_steps == 2
    assert block.step_time_seconds.max == 1.2 and block.median_step_time_seconds == 1.0
    assert block.total_time_seconds == pytest.approx(sum(times))  # warm-up included: the run's wall time
    assert block.tokens_per_second == 64 * 2048 and block.tokens_per_second_per_gpu == 64 * 2048 / 8
    flops = flops_per_token(shape, 2048)
    assert block.tflops_per_gpu.full == pytest.approx(16384 * flops.full / 1e12)
    assert block.mfu.full == pytest.approx(16384 * flops.full / 989.4e12)
    assert block.mfu.causal < block.mfu.full
    assert block.mfu_reason is None


def test_no_measured_steps_gives_nulls_with_reason():
    block = performance_metrics([1.0, 1.0], skip_steps=2, global_batch_size=8, seq_len=128, world_size=1,
                                shape=get_shape("qwen", "tiny", 512), peak_tflops=None, peak_reason="cpu")
    assert block.tokens_per_second is None and block.mfu is None
    assert "no measured steps" in block.mfu_reason


def test_memory_reason_on_cpu_and_summary_on_gpu():
    assert memory_metrics([None, None], reason="cpu: not measured").reason == "cpu: not measured"
    block = memory_metrics([1.0, 3.0])
    assert block.avg_allocated_gb == 2.0 and block.peak_allocated_gb == 3.0 and block.reason is None


def test_disagreement_flag():
    assert disagreement(100.0, 104.0, "tflops").flagged is False
    flagged = disagreement(100.0, 110.0, "tflops")
    assert flagged.flagged is True and flagged.relative_gap == pytest.approx(0.10)
    assert disagreement(None, 1.0, "tflops") is None


def test_framework_tflops_are_compared_with_the_nearer_convention():
    shape = get_shape("llama", "full")
    ours = performance_metrics([1.0] * 4, skip_steps=0, global_batch_size=64, seq_len=2048, world_size=8,
                               shape=shape, peak_tflops=None, peak_reason="unknown")
    reported = framework_reported(ours, source="test", tflops_per_gpu=ours.tflops_per_gpu.causal * 1.01)
    (tflops,) = reported.disagreements
    assert tflops.metric == "tflops_per_gpu (causal)" and not reported.flagged
    assert tflops.other_conventions[0].metric == "tflops_per_gpu (full)"


def test_record_steps_fills_arrays_and_blocks_from_the_results_own_config_and_device():
    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "TRAIN_ITERS": "4",
                               "WARMUP_STEPS": "1"})
    shape = get_shape("llama")
    result = new_result(cfg, platform="nvd", framework="mega", model="llama", shape=shape,
                        gpu_info=gpu_info_for_device("nvd", "NVIDIA H100 80GB HBM3", 8), source=Source(kind="log"))
    arrays = {"step_times": [3.0, 1.0, 1.0, 1.0], "loss_values": [4.0, 3.0, 2.0, 1.0],
              "learning_rates": [0.0, 1e-4, 2e-4, 3e-4], "memory_allocated_gb": [10.0, 12.0, 12.0, None]}
    performance = record_steps(result, arrays, skip_steps=1, shape=shape)
    assert result.performance_metrics is performance and result.step_times == arrays["step_times"]
    assert performance.peak_tflops == 989.4 and performance.peak_precision == "bf16"
    assert performance.tokens_per_second == cfg.gbs * cfg.sl / 1.0
    assert result.memory_metrics.peak_allocated_gb == 12.0
