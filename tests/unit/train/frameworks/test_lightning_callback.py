"""train/nemo/callback.py's BenchmarkCallback inside real (tiny, CPU) Lightning training runs: no NeMo needed.

lightning is imported by the tests, not when the module is collected (``tests/helpers/lightning_models.py`` says
why); the autouse fixture below skips every test of the module where it is not installed, as the module-level
``importorskip`` did.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.nemo import write_config
from train.nemo.callback import LightningMeasurement
from utils.config.load import load_config
from utils.machine.hardware import collect_gpu_info
from utils.result.file import new_result, read_result
from utils.schema.measures import Source
from utils.spec.models import get_shape

if TYPE_CHECKING:
    from lightning.pytorch import LightningModule, Trainer

STEPS, SKIP, WARMUP_SLEEP = 12, 3, 0.25


@pytest.fixture(autouse=True)
def _lightning() -> None:
    """Each test skips where lightning is not installed (imported here, by the first test that runs)."""
    pytest.importorskip("lightning")


def _tiny(**kwargs: Any) -> LightningModule:
    """The linear model of tests/helpers/lightning_models.py over STEPS batches, its first SKIP steps sleeping
    WARMUP_SLEEP each unless ``kwargs`` say otherwise."""
    from tests.helpers.lightning_models import TinyRegression

    return TinyRegression(**{"steps": STEPS, "slow_steps": SKIP, "warmup_sleep": WARMUP_SLEEP, **kwargs})


def _validated(val_losses: list[float]) -> LightningModule:
    from tests.helpers.lightning_models import ValidatedRegression

    return ValidatedRegression(val_losses, steps=STEPS)


def _measurement(tmp_path, rank0: bool = True) -> LightningMeasurement:
    cfg = load_config(write_config(tmp_path, MODEL_SIZE="tiny", TRAIN_ITERS=str(STEPS), MEASURE_SKIP_STEPS=str(SKIP),
                                   MBS="4", DP="1", GA="16", SL="64", GPUS_PER_NODE="1", WARMUP_STEPS="2",
                                   PLATFORM="cpu"), environ={})
    shape = get_shape("llama", "tiny", vocab_size=512)
    result = new_result(cfg, platform="cpu", framework="nemo", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    return LightningMeasurement(
        result=result, path=tmp_path / "result.json" if rank0 else None, shape=shape, skip_steps=cfg.skip_steps,
        power_reason="platform cpu: no GPU board power sensor",
    )


def _fit(module: LightningModule, measurement: LightningMeasurement) -> None:
    from lightning.pytorch import Trainer

    from train.nemo.callback import BenchmarkCallback

    trainer = Trainer(accelerator="cpu", devices=1, max_steps=STEPS, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False,
                      callbacks=[BenchmarkCallback(measurement)])
    trainer.fit(module)


@pytest.mark.slow
def test_real_lightning_run_gives_a_valid_result_with_warmup_excluded(tmp_path):
    measurement = _measurement(tmp_path)
    module = _tiny()
    _fit(module, measurement)
    result = read_result(tmp_path / "result.json")  # schema-validated
    assert result.status == "ok" and result.error is None
    assert len(result.step_times) == STEPS == len(module.losses)
    # Loss and LR are the step's own: the module's loss, and the rate the optimizer applied in that step.
    assert result.loss_values == pytest.approx(module.losses, rel=1e-6)
    assert result.learning_rates == pytest.approx(module.lrs)
    assert result.learning_rates[:3] == pytest.approx([0.05 / 3, 0.1 / 3, 0.05])
    losses = result.loss_values
    assert statistics.fmean(losses[-4:]) < statistics.fmean(losses[:4])
    perf = result.performance_metrics
    assert perf.skipped_steps == SKIP and perf.measured_steps == STEPS - SKIP
    # The warm-up steps slept; none of that time is in the statistics, all of it is in the array.
    assert min(result.step_times[:SKIP]) >= WARMUP_SLEEP
    assert perf.step_time_seconds.max < WARMUP_SLEEP
    measured = sorted(result.step_times[SKIP:])
    assert perf.median_step_time_seconds == pytest.approx(statistics.median(measured))
    assert perf.tokens_per_step == 4 * 16 * 64
    assert perf.tokens_per_second == pytest.approx(4 * 16 * 64 / perf.median_step_time_seconds)
    assert perf.mfu is None and perf.mfu_reason
    assert result.memory_metrics.peak_allocated_gb is None and result.memory_metrics.reason
    assert result.power_metrics.energy_j is None and "cpu" in result.power_metrics.reason
    assert result.source.kind == "callback"


@pytest.mark.slow
def test_an_exception_mid_run_leaves_a_failed_result_with_the_steps_so_far(tmp_path):
    measurement = _measurement(tmp_path)
    with pytest.raises(RuntimeError, match="out of memory"):
        _fit(_tiny(slow_steps=0, fail_at=6), measurement)
    result = read_result(tmp_path / "result.json")
    assert result.status == "failed"
    assert "RuntimeError: CUDA out of memory (simulated)" in result.error and "5 of 12 steps" in result.error
    assert len(result.step_times) == 5 and result.performance_metrics.measured_steps == 5 - SKIP


@pytest.mark.slow
def test_a_non_finite_loss_stops_the_run_as_failed(tmp_path):
    measurement = _measurement(tmp_path)
    _fit(_tiny(slow_steps=0, nan_at=5), measurement)
    result = read_result(tmp_path / "result.json")
    assert result.status == "failed" and "loss became non-finite" in result.error
    assert len(result.step_times) == 5 and result.loss_values[4] is None
    assert all(math.isfinite(v) for v in result.loss_values[:4])


@pytest.mark.slow
def test_an_interrupt_leaves_an_incomplete_result(tmp_path):
    measurement = _measurement(tmp_path)
    with pytest.raises(SystemExit):  # Lightning turns Ctrl+C into a graceful exit(1)
        _fit(_tiny(slow_steps=0, interrupt_at=4), measurement)
    result = read_result(tmp_path / "result.json")
    assert result.status == "incomplete" and "interrupted" in result.error
    assert len(result.step_times) == 3


@pytest.mark.slow
def test_non_zero_ranks_measure_but_write_nothing(tmp_path):
    measurement = _measurement(tmp_path, rank0=False)
    _fit(_tiny(slow_steps=0), measurement)
    assert not (tmp_path / "result.json").exists()
    assert measurement.finished and len(measurement.result.step_times) == STEPS


def test_framework_reported_step_time_is_compared_with_ours(tmp_path):
    measurement = _measurement(tmp_path)
    measurement.framework_time_key = "train_step_timing in s"
    ticks = itertools.count()
    measurement.monitor.clock = lambda: float(next(ticks))  # every step takes exactly 1 s by our clock
    for step in range(STEPS):
        measurement.begin_step()
        measurement.end_step(1.0 / (step + 1), 1e-3, framework_time=9.0 if step < SKIP else 1.2)
    measurement.finish("ok", None)
    reported = read_result(tmp_path / "result.json").performance_metrics.framework_reported
    assert reported.median_step_time_seconds == 1.2  # their warm-up steps excluded like ours
    (step,) = reported.disagreements
    assert step.metric == "median step time (s)" and step.ours == 1.0 and step.flagged is True
    assert reported.flagged and "train_step_timing in s" in reported.source


def test_energy_window_covers_the_measured_steps_only(tmp_path):
    from tests.helpers.devices import FakeNvml
    from utils.machine.device_counters import open_reader
    from utils.measure.power import MeasuredWindow, device_meter

    measurement = _measurement(tmp_path)
    reader, _ = open_reader("nvd", 0, library=FakeNvml(energy_mj=[0, 1_000_000, 1_900_000]))
    measurement.power = MeasuredWindow(device_meter(reader), None, gpus_total=1, tokens_per_step=4 * 16 * 64,
                                       warmup_steps=SKIP)
    for step in range(STEPS):
        measurement.begin_step()
        assert measurement.power.running is (step >= SKIP)  # started with the first measured step
        measurement.end_step(1.0, 1e-3)
    measurement.power.stop(STEPS)
    measurement.finish("ok", None)
    power = read_result(tmp_path / "result.json").power_metrics
    assert power.energy_source == "energy_counter" and power.energy_j == pytest.approx(900.0)
    assert power.tokens == (STEPS - SKIP) * 4 * 16 * 64


def test_callback_module_imports_without_lightning():
    import subprocess
    import sys

    from tests.helpers.nemo import REPO

    code = ("import sys; sys.modules['lightning'] = None; import train.nemo.callback as m; "
            "assert hasattr(m, 'LightningMeasurement');\n"
            "try:\n    m.BenchmarkCallback\nexcept ImportError:\n    sys.exit(0)\nsys.exit(1)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _evaluated(tmp_path, target: str) -> tuple[LightningMeasurement, Trainer]:
    from lightning.pytorch import Trainer

    from train.nemo.callback import BenchmarkCallback, EvaluationRecorder

    measurement = _measurement(tmp_path)
    # GBS 64 (MBS 4 x GA 16): evaluate 64 samples every 192 (3 steps)
    cfg = load_config(write_config(tmp_path, MODEL_SIZE="tiny", TRAIN_ITERS=str(STEPS), MBS="4", DP="1", GA="16",
                                   SL="64", GPUS_PER_NODE="1", WARMUP_STEPS="2", PLATFORM="cpu", EVAL_INTERVAL="192",
                                   EVAL_SAMPLES="64", TARGET_LOSS=target), environ={})
    measurement.evaluation = EvaluationRecorder(cfg)
    trainer = Trainer(accelerator="cpu", devices=1, max_steps=STEPS, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, val_check_interval=3,
                      num_sanity_val_steps=0, limit_val_batches=1, callbacks=[BenchmarkCallback(measurement)])
    return measurement, trainer


@pytest.mark.slow
def test_nemo_evaluations_stop_the_run_at_the_target_as_ok(tmp_path):
    """Issue 34: val_loss read after each validation; at or below TARGET_LOSS the run stops (should_stop), ok."""
    _, trainer = _evaluated(tmp_path, "5")
    trainer.fit(_validated([7.0, 6.0, 5.0, 4.0]))
    result = read_result(tmp_path / "result.json")
    quality = result.quality
    assert result.status == "ok" and len(result.step_times) == 9  # stopped after the evaluation at step 9
    assert [(e.step, e.loss) for e in quality.evaluations] == [(3, 7.0), (6, 6.0), (9, 5.0)]
    assert quality.reached and quality.stopped_at_target and quality.samples_to_target == 9 * 64
    assert "MaskedTokenLossReduction" in quality.reduction and quality.run_start_unix is not None
    times = [e.seconds for e in quality.evaluations]
    assert times == sorted(times) and all(e.eval_seconds is not None for e in quality.evaluations)


@pytest.mark.slow
def test_a_nan_evaluation_stops_the_nemo_run_as_failed_with_its_reason(tmp_path):
    _, trainer = _evaluated(tmp_path, "")
    trainer.fit(_validated([7.0, float("nan"), 5.0, 4.0]))
    result = read_result(tmp_path / "result.json")
    assert result.status == "failed" and "not finite" in result.error and len(result.step_times) == 6
    assert result.quality.evaluations[-1].loss is None and result.quality.evaluations[-1].loss_reason


@pytest.mark.slow
def test_every_validation_reads_the_same_samples_the_callback_moves_no_sampler(tmp_path):
    """Issue 50: NeMo's validation sampler starts at 0 for a validation loader and Lightning re-iterates that loader at
    each validation, so evaluation k reads the same first samples, MLPerf's measure; the callback leaves it there."""
    from tests.helpers.lightning_models import SampledValidation

    _, trainer = _evaluated(tmp_path, "")
    module = SampledValidation([7.0, 6.0, 5.0, 4.0], steps=STEPS)
    trainer.fit(module)
    assert len(module.read) >= 3 and all(read == [0, 1, 2, 3] for read in module.read)  # limit_val_batches=1
    assert module.sampler.consumed_samples == 0
    assert read_result(tmp_path / "result.json").quality.fixed_set is True
