"""tprimat's measurement inside a Lightning run (NeMo 2 trains through Lightning).

:class:`LightningMeasurement` is plain and testable without Lightning; the ``Callback`` around it
(:func:`benchmark_callback_class`) is built on first use, so this module imports without lightning. Every
validation reads the same first EVAL_SAMPLES sequences, MLPerf's measure, by NeMo's own doing: its sampler starts
at 0 for every loader but training's (``nemo/lightning/pytorch/plugins/data_sampler.py:81``, v2.1.0 and v2.3.0).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.logs.quality import HELD_OUT, NEMO_REDUCTION
from utils.config.model import Config
from utils.measure.metrics import framework_reported
from utils.measure.monitor import StepMonitor, StepRecord
from utils.measure.power import MeasuredWindow, null_power_metrics
from utils.measure.quality import build_quality, make_evaluation, stop_reason
from utils.result.file import finalize_result, write_result
from utils.result.step_log import StepLog, record_steps
from utils.schema.model import Result
from utils.spec.models import ModelShape

LOSS_KEYS = ("reduced_train_loss", "train_loss", "loss")
VAL_LOSS_KEY = "val_loss"  # what NeMo's strategy logs (nemo/lightning/pytorch/strategies/megatron_strategy.py:773-798)


@dataclass
class EvaluationRecorder:
    """The run's held-out evaluations as the result records them, and the stop they call for (plain: the callback
    below feeds it). The validation's end is taken after the value was read, a synchronization."""

    cfg: Config
    reduction: str = NEMO_REDUCTION
    run_start_unix: float | None = None
    evaluations: list[Any] = field(default_factory=list)  # utils.schema.quality.Evaluation
    stop: str | None = None
    _started: float | None = None

    def train_step_start(self) -> None:
        if self.run_start_unix is None:
            self.run_start_unix = time.time()

    def validation_start(self) -> None:
        self._started = time.time()

    def validation_end(self, step: int, loss: float) -> str | None:
        """Record the evaluation after training step ``step``; why the run must stop now, or None."""
        now = time.time()
        start = self.run_start_unix if self.run_start_unix is not None else now
        evaluation = make_evaluation(self.cfg, step=step, loss=loss, seconds=now - start,
                                     eval_seconds=None if self._started is None else now - self._started, unix_s=now)
        self.evaluations.append(evaluation)
        reason = stop_reason(self.cfg, evaluation)
        if reason is not None and self.stop is None:
            self.stop = reason
        return reason

    def block(self, platform: str, gpus: int) -> Any:
        """The result's ``quality`` block (the launcher adds the energy to target from its trace)."""
        return build_quality(self.cfg, self.evaluations, reduction=self.reduction, held_out=HELD_OUT["nemo"],
                             platform=platform, gpus=gpus,
                             run_start_unix=self.run_start_unix, stop=self.stop,
                             energy_reason="energy to target is the launcher's (its counter trace)")

    @property
    def failed(self) -> str | None:
        """A non-finite evaluation's stop: the run fails with it (a target reached is an ok ending)."""
        last = self.evaluations[-1] if self.evaluations else None
        return self.stop if last is not None and last.loss is None else None
# Exceptions that mean "stopped from outside", not "failed": Ctrl+C, tprimat's signal handler, Lightning's SIGTERM.
INTERRUPT_EXCEPTIONS = ("KeyboardInterrupt", "Interrupted", "SIGTERMException")


@dataclass
class LightningMeasurement:
    """One rank's measurement of a Lightning run, and the result it ends in. Rank 0 passes ``path``; other ranks pass
    ``None`` and measure only. ``finish`` is idempotent: the first status set is the one written."""

    result: Result
    path: Path | None
    shape: ModelShape
    skip_steps: int
    monitor: StepMonitor = field(default_factory=StepMonitor)
    power: MeasuredWindow | None = None
    power_reason: str = "power not measured"
    loss_keys: tuple[str, ...] = LOSS_KEYS
    framework_time_key: str | None = None  # e.g. NeMo TimingCallback's "train_step_timing in s"
    framework_time_label: str = "framework's own step time"
    framework_times: list[float | None] = field(default_factory=list)
    stop_reason: str | None = None
    finished: bool = False
    # Rank 0's per-step record, written as steps end so a killed run keeps them (utils/result/step_log.py).
    step_log: StepLog | None = None
    # The held-out evaluations (issue 34), when EVAL_INTERVAL/EVAL_SAMPLES turn evaluation on.
    evaluation: EvaluationRecorder | None = None

    # -- per step ------------------------------------------------------------
    def begin_step(self) -> None:
        if len(self.monitor.records) == self.skip_steps:
            self.monitor.start_window()  # one sync: the wall-clock check's (and energy's) window starts here
            if self.power is not None:
                self.power.start()  # measured steps only: warm-up does not dilute the figures
        self.monitor.start_step()

    def end_step(self, loss: Any, lr: float | None, framework_time: Any = None) -> StepRecord:
        """End a step; ``loss`` (and the framework's time) may be device tensors: read later, never here."""
        record = self.monitor.end_step(loss, lr)
        self.framework_times.append(framework_time)
        self.report(self.monitor.drain())
        return record

    def report(self, records: list[StepRecord]) -> None:
        """Steps whose time and loss were read (at once on cpu, a few steps late on a GPU)."""
        for record in records:
            if self.step_log is not None:
                self.step_log.append(record.step, record.time_s, record.loss, record.lr, record.memory_allocated_gb)
            if record.loss is not None and not math.isfinite(record.loss) and self.stop_reason is None:
                self.stop_reason = f"loss became non-finite ({record.loss}) at step {record.step}"

    # -- result --------------------------------------------------------------
    def fill(self) -> None:
        """Copy the measurement into the result: arrays, performance, memory, framework's figures, energy."""
        self.monitor.finish()
        peak_allocated, peak_reserved = self.monitor.peak_memory()
        performance = record_steps(
            self.result, self.monitor.arrays(), skip_steps=self.skip_steps, shape=self.shape,
            peak_allocated_gb=peak_allocated, peak_reserved_gb=peak_reserved,
            memory_reason=None if peak_allocated is not None else "device memory is only measured on GPUs",
        )
        read = [_lightning_scalar(t) for t in self.framework_times[self.skip_steps:]]  # after the run: no stall
        theirs = [t for t in read if t is not None and math.isfinite(t)]
        if self.framework_time_key and theirs:
            performance.framework_reported = framework_reported(
                performance, source=f"{self.framework_time_label} (logged as {self.framework_time_key!r})",
                median_step_time_seconds=statistics.median(theirs))
        steps = len(self.monitor.records)
        metrics = (self.power.metrics(steps) if self.power is not None
                   else null_power_metrics(self.power_reason, self.result.training_config.num_gpus))
        start, end = self.monitor.window_unix  # the window the launcher's energy is taken over (train/launch/energy.py)
        self.result.power_metrics = metrics.model_copy(update={"window_start_unix": start, "window_end_unix": end})
        if self.evaluation is not None:
            config = self.result.training_config
            self.result.quality = self.evaluation.block(self.result.platform, config.num_gpus or 1)

    def finish(self, status: str, error: str | None) -> None:
        """Fill, finalize (``ok`` only with every expected step) and, on rank 0, write the result."""
        if self.finished:
            return
        self.finished = True
        self.report(self.monitor.finish())
        if self.step_log is not None:
            self.step_log.close()
        self.fill()
        if self.stop_reason is not None and status == "ok":
            status, error = "failed", self.stop_reason
        failed_evaluation = self.evaluation.failed if self.evaluation is not None else None
        if failed_evaluation is not None and status == "ok":
            status, error = "failed", failed_evaluation
        finalize_result(self.result, status, error)
        if self.path is not None:
            write_result(self.path, self.result)

    def finish_from_exception(self, exc: BaseException) -> None:
        """``incomplete`` for an interrupt, ``failed`` with the exception (OOM, NCCL, NaN check) otherwise."""
        name = type(exc).__name__
        reason = f"{name}: {exc}".strip().rstrip(":")
        if isinstance(exc, KeyboardInterrupt) or name in INTERRUPT_EXCEPTIONS:
            self.finish("incomplete", f"interrupted ({reason}) before the run finished")
        else:
            self.finish("failed", reason)


def _lightning_scalar(value: Any) -> float | None:
    if value is None:
        return None
    if hasattr(value, "detach"):
        if value.numel() != 1:
            return None
        value = value.detach().float().item()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _device_scalar(value: Any) -> Any:
    """A one-element tensor as it is (the monitor reads it off the critical path), anything else as a float."""
    if hasattr(value, "detach") and value.numel() == 1:
        return value.detach().float().reshape(())
    return _lightning_scalar(value)


def _gather_objects(local: Any) -> list[Any]:
    """Every rank's value on every rank (a collective: all ranks reach train end), or just ours alone."""
    # torch: 4.8 s to import (python -X importtime); the tests import this module without a process group
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, local)
        return gathered
    return [local]


def _build_benchmark_callback_class() -> type:
    # Lightning: NeMo's image only (the class is built there)
    from lightning.pytorch.callbacks import Callback

    class BenchmarkCallback(Callback):
        """Times every optimizer step with the device synchronized, records loss/LR/memory/energy. LR is the optimizer's
        rate read at step start, i.e. the rate this step applied."""

        def __init__(self, measurement: LightningMeasurement) -> None:
            super().__init__()
            self.measurement = measurement
            self._lr: float | None = None

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if self.measurement.monitor.device is None:
                device = getattr(trainer.strategy, "root_device", None)
                self.measurement.monitor.device = device if getattr(device, "type", None) == "cuda" else None

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self._lr = self._current_lr(trainer)
            if self.measurement.evaluation is not None:
                self.measurement.evaluation.train_step_start()
            self.measurement.begin_step()

        def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
            if self.measurement.evaluation is not None and not trainer.sanity_checking:
                self.measurement.evaluation.validation_start()

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            recorder = self.measurement.evaluation
            if recorder is None or trainer.sanity_checking:
                return
            value = _lightning_scalar(trainer.callback_metrics.get(VAL_LOSS_KEY))
            reason = recorder.validation_end(trainer.global_step, math.nan if value is None else value)
            stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
            if stop:
                trainer.should_stop = True

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            metrics = trainer.callback_metrics
            loss = next((_device_scalar(metrics[k]) for k in self.measurement.loss_keys if k in metrics), None)
            if loss is None:
                loss = _device_scalar(outputs.get("loss") if isinstance(outputs, dict) else outputs)
            key = self.measurement.framework_time_key
            theirs = _device_scalar(metrics.get(key)) if key else None
            self.measurement.end_step(loss, self._lr, theirs)
            if self.measurement.stop_reason is not None:
                trainer.should_stop = True

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            if self.measurement.power is not None:
                self.measurement.power.stop(len(self.measurement.monitor.records), _gather_objects)
            self.measurement.finish("ok", None)

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.measurement.finish_from_exception(exception)

        @staticmethod
        def _current_lr(trainer: Any) -> float | None:
            optimizers = getattr(trainer, "optimizers", None) or []
            groups = getattr(optimizers[0], "param_groups", None) if optimizers else None
            return _lightning_scalar(groups[0].get("lr")) if groups else None

    return BenchmarkCallback


_CALLBACK_CLASS: type | None = None


def benchmark_callback_class() -> type:
    """The Lightning ``BenchmarkCallback`` class (imports lightning on first use)."""
    global _CALLBACK_CLASS
    if _CALLBACK_CLASS is None:
        _CALLBACK_CLASS = _build_benchmark_callback_class()
    return _CALLBACK_CLASS


def __getattr__(name: str) -> Any:
    # ``from train.nemo.callback import BenchmarkCallback`` works wherever lightning is installed.
    if name == "BenchmarkCallback":
        return benchmark_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
