"""train/launch/energy.py: the launcher's energy over the measured window, for a logging and an in-process framework."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.paths import FIXTURES
from train.launch.energy import apply_energy, measured_window
from train.logs.scan import iteration_times, scan_file
from utils.measure.energy_trace import CounterTrace, Reading
from utils.schema.measures import PerformanceMetrics, PowerMetrics

LOG = FIXTURES / "logs" / "megatron_core012_llama.log"


class _Counter:
    counter_method = "fake counter"

    def read_joules(self) -> float:
        raise AssertionError("the test fills the readings itself")


def trace_at(start: float, gpus: int, watts: float = 700.0) -> CounterTrace:
    trace = CounterTrace([_Counter() for _ in range(gpus)])
    trace.readings = [Reading(start + k * 0.5, tuple(watts * k * 0.5 for _ in range(gpus))) for k in range(400)]
    return trace


def fake(log_path: Path | None, skipped: int, measured: int, power: PowerMetrics | None):
    cfg = SimpleNamespace(world_size=8, tokens_per_step=64 * 8192, gpus_per_node=8)
    perf = PerformanceMetrics.model_construct(skipped_steps=skipped, measured_steps=measured)
    result = SimpleNamespace(performance_metrics=perf, power_metrics=power,
                             training_config=SimpleNamespace(num_gpus=8))
    return SimpleNamespace(cfg=cfg, log_path=log_path, platform="nvd"), result


def test_a_megatron_run_gets_energy_over_its_logged_window() -> None:
    ctx, result = fake(LOG, 2, 8, PowerMetrics(reason="the log has no energy/power fields"))
    window, reason = measured_window(ctx, result)
    assert reason is None and window.steps == 8
    apply_energy(ctx, result, trace_at(datetime(2025, 5, 1, 10, 0).timestamp(), 8), None)
    metrics = result.power_metrics
    assert metrics.reason is None and metrics.gpus_measured == 8 and "iterations 3-10" in metrics.window
    assert metrics.avg_power_w_per_gpu == pytest.approx(700.0)
    assert metrics.tokens == 8 * 64 * 8192 and metrics.tokens_per_kwh > 0


@pytest.mark.parametrize("log", sorted(p for p in (FIXTURES / "logs").rglob("*.log")), ids=lambda p: p.name)
def test_the_window_reads_the_iterations_the_full_scan_keeps(log: Path) -> None:
    """The energy window's own reading of the log gives exactly the scan's iterations (so the same window)."""
    kept = [(r.iteration, r.timestamp, r.step_time_s) for r in scan_file(log).iterations]
    assert iteration_times(log) == kept


def test_the_window_keeps_the_first_timed_plausible_line_of_each_iteration(tmp_path: Path) -> None:
    line = "[2025-05-01 10:00:{s:02d}] iteration {i:>3}/ 10 | elapsed time per iteration (ms): {ms} | lm loss: 9.1 |"
    log = tmp_path / "job.log"
    log.write_text("\n".join([
        line.format(s=1, i=1, ms=-5.0),  # no step takes a negative time: dropped
        line.format(s=2, i=1, ms=1000.0),
        line.format(s=3, i=1, ms=1200.0),  # logged twice: the first kept
        "[2025-05-01 10:00:04] iteration   2/ 10 | lm loss: 9.0 |",  # no elapsed time: dropped
        line.format(s=5, i=2, ms=900.0),
    ]) + "\n")
    expected = [(1, "2025-05-01 10:00:02", 1.0), (2, "2025-05-01 10:00:05", 0.9)]
    assert iteration_times(log) == expected
    assert [(r.iteration, r.timestamp, r.step_time_s) for r in scan_file(log).iterations] == expected


def test_an_in_process_run_uses_its_own_window() -> None:
    own = PowerMetrics(reason="no counter", window_start_unix=1000.0, window_end_unix=1010.0)
    ctx, result = fake(None, 2, 5, own)
    apply_energy(ctx, result, trace_at(990.0, 8), None)
    metrics = result.power_metrics
    assert metrics.energy_j == pytest.approx(8 * 700.0 * 10.0) and "synchronized window of 5" in metrics.window
    assert (metrics.window_start_unix, metrics.window_end_unix) == (1000.0, 1010.0)


def test_without_counters_the_result_keeps_its_own_energy_or_gets_the_reason() -> None:
    measured = PowerMetrics(energy_j=10.0, energy_kwh=10 / 3.6e6, tokens=100, tokens_per_kwh=3.6e7)
    ctx, result = fake(None, 2, 5, measured)
    apply_energy(ctx, result, None, "nvidia-ml-py (pynvml) is not installed")
    assert result.power_metrics is measured
    ctx, result = fake(None, 2, 5, PowerMetrics(reason="none"))
    apply_energy(ctx, result, None, "nvidia-ml-py (pynvml) is not installed")
    assert result.power_metrics.energy_j is None and "pynvml" in result.power_metrics.reason


def test_energy_to_target_comes_from_the_trace_between_the_first_step_and_the_target() -> None:
    """Issue 34: the launcher fills the quality block's energy to target from its counter trace."""
    from utils.config.model import Config
    from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation

    cfg = Config(dp=8, ga=1, train_iters=20, warmup_steps=1, eval_interval=40, eval_samples=8, target_loss=5.0)
    start = 1_746_093_700.0
    evaluations = [make_evaluation(cfg, step=5 * k, loss=loss, seconds=20.0 * k, eval_seconds=1.0,
                                   unix_s=start + 20.0 * k) for k, loss in ((1, 6.0), (2, 4.5))]
    quality = build_quality(cfg, evaluations, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET, platform="nvd", gpus=8,
                            run_start_unix=start, energy_reason="the launcher measures it")
    assert quality.energy_to_target_kwh is None and quality.reached
    ctx, result = fake(None, 2, 18, PowerMetrics(reason="none"))
    result.quality = quality
    apply_energy(ctx, result, trace_at(start - 10.0, 8), None)
    # 8 GPUs at 700 W for the 40 s from the first step to the evaluation at the target
    assert result.quality.energy_to_target_kwh == pytest.approx(8 * 700.0 * 40.0 / 3.6e6)
    assert result.quality.gpu_hours_to_target == pytest.approx(8 * 40.0 / 3600)
