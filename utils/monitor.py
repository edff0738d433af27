"""Step measurement, the same for every framework.

A step is timed from its start to its end with the device synchronized at both
ends, because GPU kernels run asynchronously and an unsynchronized clock measures
the launch queue, not the work (NeMo's own ``TimingCallback`` has that flaw).
Per-step arrays are kept whole; the first ``skip_steps`` steps are warm-up and
excluded from the summary statistics only.

:func:`performance_block` and :func:`memory_block` turn per-step arrays into the
result's summary blocks. Both in-process monitors and log extraction use them,
so throughput and MFU are computed one way for every framework:
``tokens_per_second = GBS * SL / median_step_time``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utils.models import ModelShape, flops_per_token, mfu

GIB = 1024**3


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    """mean, median, std (sample), min, max, p5, p95 of ``values``; None when empty."""
    data = sorted(float(v) for v in values)
    if not data:
        return None

    def percentile(q: float) -> float:
        # Linear interpolation between closest ranks (numpy's default method).
        position = (len(data) - 1) * q
        low, high = math.floor(position), math.ceil(position)
        return data[low] + (data[high] - data[low]) * (position - low)

    return {
        "mean": statistics.fmean(data),
        "median": statistics.median(data),
        "std": statistics.stdev(data) if len(data) > 1 else 0.0,
        "min": data[0],
        "max": data[-1],
        "p5": percentile(0.05),
        "p95": percentile(0.95),
        "count": len(data),
    }


def performance_block(
    step_times: Sequence[float | None],
    *,
    skip_steps: int,
    global_batch_size: int,
    seq_len: int,
    world_size: int,
    shape: ModelShape,
    peak_tflops: float | None,
    peak_reason: str | None,
    peak_precision: str = "bf16",
) -> dict[str, Any]:
    """Summary of the measured (post-warm-up) steps: step time, throughput, FLOPs, MFU."""
    measured = [t for t in step_times[skip_steps:] if t is not None and math.isfinite(t)]
    stats = summarize(measured)
    tokens_per_step = global_batch_size * seq_len
    flops = flops_per_token(shape, seq_len)
    block: dict[str, Any] = {
        "measured_steps": len(measured),
        "skipped_steps": min(skip_steps, len(step_times)),
        "step_time_seconds": stats,
        "avg_step_time_seconds": stats["mean"] if stats else None,
        "median_step_time_seconds": stats["median"] if stats else None,
        "tokens_per_step": tokens_per_step,
        "tokens_per_second": None,
        "tokens_per_second_per_gpu": None,
        "steps_per_second": None,
        "flops_per_token": flops.as_dict(),
        "tflops_per_gpu": None,
        "peak_tflops": peak_tflops,
        "peak_precision": peak_precision,
        "mfu": None,
        "mfu_reason": peak_reason if peak_tflops is None else None,
        "throughput_basis": "GBS * SL / median step time over measured steps",
    }
    if not stats or stats["median"] <= 0:
        block["mfu_reason"] = "no measured steps: throughput and MFU not computed"
        return block
    tps = tokens_per_step / stats["median"]
    per_gpu = tps / world_size
    block.update(
        tokens_per_second=tps,
        tokens_per_second_per_gpu=per_gpu,
        steps_per_second=1.0 / stats["median"],
        tflops_per_gpu={"full": per_gpu * flops.full / 1e12, "causal": per_gpu * flops.causal / 1e12},
    )
    if peak_tflops is not None:
        block["mfu"] = {
            "full": mfu(per_gpu, flops.full, peak_tflops),
            "causal": mfu(per_gpu, flops.causal, peak_tflops),
        }
    return block


def memory_block(
    allocated_gb: Sequence[float | None],
    *,
    peak_allocated_gb: float | None = None,
    peak_reserved_gb: float | None = None,
    total_memory_gb: float | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Memory summary; values not measured on this platform are null with a reason."""
    values = [v for v in allocated_gb if v is not None]
    peak = peak_allocated_gb if peak_allocated_gb is not None else (max(values) if values else None)
    return {
        "avg_allocated_gb": statistics.fmean(values) if values else None,
        "peak_allocated_gb": peak,
        "peak_reserved_gb": peak_reserved_gb,
        "total_memory_gb": total_memory_gb,
        "reason": reason if peak is None else None,
    }


def framework_disagreement(ours: float | None, theirs: float | None, metric: str, tolerance: float = 0.05) -> (
    dict[str, Any] | None
):
    """Compare our throughput with the framework's own; flag a gap over ``tolerance``."""
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    gap = abs(ours - theirs) / ours
    return {"metric": metric, "ours": ours, "theirs": theirs, "relative_gap": gap,
            "tolerance": tolerance, "flagged": gap > tolerance}


@dataclass
class StepRecord:
    step: int
    time_s: float
    loss: float | None
    lr: float | None
    memory_allocated_gb: float | None


@dataclass
class StepMonitor:
    """Framework-agnostic step timer: call :meth:`start_step` / :meth:`end_step` around each step.

    ``device`` is a ``torch.device`` (or None on cpu); CUDA/ROCm devices are
    synchronized before each clock read and their allocated memory is recorded.
    """

    device: Any = None
    clock: Callable[[], float] = time.perf_counter
    records: list[StepRecord] = field(default_factory=list)
    _started: float | None = None

    def _sync(self) -> None:
        if self.device is not None and getattr(self.device, "type", None) == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def _allocated_gb(self) -> float | None:
        if self.device is not None and getattr(self.device, "type", None) == "cuda":
            import torch

            return torch.cuda.memory_allocated(self.device) / GIB
        return None

    def start_step(self) -> None:
        self._sync()
        self._started = self.clock()

    def end_step(self, loss: float | None = None, lr: float | None = None) -> StepRecord:
        if self._started is None:
            raise RuntimeError("end_step() called without start_step()")
        self._sync()
        elapsed = self.clock() - self._started
        self._started = None
        record = StepRecord(
            step=len(self.records) + 1,
            time_s=elapsed,
            loss=None if loss is None else float(loss),
            lr=None if lr is None else float(lr),
            memory_allocated_gb=self._allocated_gb(),
        )
        self.records.append(record)
        return record

    def peak_memory(self) -> tuple[float | None, float | None]:
        """(peak allocated, peak reserved) in GiB on a GPU; (None, None) on cpu."""
        if self.device is not None and getattr(self.device, "type", None) == "cuda":
            import torch

            return (torch.cuda.max_memory_allocated(self.device) / GIB,
                    torch.cuda.max_memory_reserved(self.device) / GIB)
        return None, None

    def arrays(self) -> dict[str, list[float | None]]:
        """Per-step arrays in the result's names (non-finite values become null)."""

        def finite(value: float | None) -> float | None:
            return value if value is not None and math.isfinite(value) else None

        return {
            "step_times": [r.time_s for r in self.records],
            "loss_values": [finite(r.loss) for r in self.records],
            "learning_rates": [finite(r.lr) for r in self.records],
            "memory_allocated_gb": [r.memory_allocated_gb for r in self.records],
        }


def fill_result(
    result: dict[str, Any],
    arrays: dict[str, list[float | None]],
    *,
    skip_steps: int,
    global_batch_size: int,
    seq_len: int,
    world_size: int,
    shape: ModelShape,
    peak_allocated_gb: float | None = None,
    peak_reserved_gb: float | None = None,
    memory_reason: str | None = None,
) -> None:
    """Copy per-step arrays into ``result`` and (re)compute its performance and memory blocks.

    The peak FLOP/s comes from the result's own ``gpu_info`` and the precision it
    ran with (fp8 when ``FP8`` is on), so MFU always matches the recorded device.
    """
    result.update({key: list(values) for key, values in arrays.items()})
    gpu = result["gpu_info"]
    precision = "fp8" if result["training_config"].get("FP8") else "bf16"
    peak = (gpu.get("peak_tflops") or {}).get(precision)
    result["performance_metrics"] = performance_block(
        result["step_times"],
        skip_steps=skip_steps,
        global_batch_size=global_batch_size,
        seq_len=seq_len,
        world_size=world_size,
        shape=shape,
        peak_tflops=peak,
        peak_reason=gpu.get("peak_tflops_reason") or f"no {precision} peak for this device",
        peak_precision=precision,
    )
    result["memory_metrics"] = memory_block(
        result.get("memory_allocated_gb", []),
        peak_allocated_gb=peak_allocated_gb,
        peak_reserved_gb=peak_reserved_gb,
        total_memory_gb=gpu.get("total_memory_gb"),
        reason=memory_reason,
    )


# ---------------------------------------------------------------------------
# Lightning adapter (NeMo 2 trains through Lightning). The measurement logic is a
# plain object; the Lightning ``Callback`` around it is built lazily, so this module
# still imports where lightning is not installed.

LOSS_KEYS = ("reduced_train_loss", "train_loss", "loss")


@dataclass
class LightningMeasurement:
    """One rank's measurement of a Lightning run, and the unified result it ends in.

    Rank 0 passes ``path``; other ranks pass ``None`` and measure only (their power
    figures are gathered to rank 0). ``finish`` is idempotent: the first status set
    (``failed`` on a non-finite loss, say) is the one written.
    """

    result: dict[str, Any]
    path: Any  # pathlib.Path | None
    shape: ModelShape
    skip_steps: int
    global_batch_size: int
    seq_len: int
    world_size: int
    expected_steps: int
    monitor: StepMonitor = field(default_factory=StepMonitor)
    power: Any = None  # utils.power.PowerSampler | None
    power_reason: str | None = "power not sampled"
    loss_keys: tuple[str, ...] = LOSS_KEYS
    framework_time_key: str | None = None  # e.g. NeMo TimingCallback's "train_step_timing in s"
    framework_time_label: str = "framework's own step time"
    framework_times: list[float | None] = field(default_factory=list)
    power_devices: list[Any] | None = None  # gathered DeviceEnergy dicts, one per GPU
    stop_reason: str | None = None
    finished: bool = False

    # -- per step ------------------------------------------------------------
    def begin_step(self) -> None:
        if self.power is not None and len(self.monitor.records) == self.skip_steps and not self.power.running:
            self.power.start()  # measured steps only: warm-up does not dilute the average
        self.monitor.start_step()

    def end_step(self, loss: float | None, lr: float | None, framework_time: float | None = None) -> StepRecord:
        record = self.monitor.end_step(loss, lr)
        self.framework_times.append(framework_time)
        if record.loss is not None and not math.isfinite(record.loss) and self.stop_reason is None:
            self.stop_reason = f"loss became non-finite ({record.loss}) at step {record.step}"
        return record

    # -- result --------------------------------------------------------------
    def stop_power(self) -> Any:
        return self.power.stop() if self.power is not None and self.power.running else None

    def fill(self, result: dict[str, Any]) -> None:
        """Copy the measurement into ``result``: arrays, performance, memory, power."""
        peak_allocated, peak_reserved = self.monitor.peak_memory()
        fill_result(
            result, self.monitor.arrays(), skip_steps=self.skip_steps, global_batch_size=self.global_batch_size,
            seq_len=self.seq_len, world_size=self.world_size, shape=self.shape,
            peak_allocated_gb=peak_allocated, peak_reserved_gb=peak_reserved,
            memory_reason=None if peak_allocated is not None else "device memory is only measured on GPUs",
        )
        perf = result["performance_metrics"]
        theirs = [t for t in self.framework_times[self.skip_steps:] if t is not None and math.isfinite(t)]
        if self.framework_time_key and theirs:
            their_median = statistics.median(theirs)
            perf["framework_reported"] = {
                "metric": self.framework_time_key, "source": self.framework_time_label,
                "median_step_time_seconds": their_median,
                "step_time": framework_disagreement(perf["median_step_time_seconds"], their_median,
                                                    "median step time (s)"),
            }
        result["power_metrics"] = self._power_block(len(result["step_times"]))

    def _power_block(self, steps_done: int) -> dict[str, Any]:
        from utils.power import null_power_metrics, power_metrics

        if self.power_devices is None:
            return null_power_metrics(self.power_reason or "power not sampled")
        measured = max(steps_done - self.skip_steps, 0)
        return power_metrics(self.power_devices, gpus_total=self.world_size,
                             tokens=measured * self.global_batch_size * self.seq_len)

    def finish(self, status: str, error: str | None) -> None:
        """Fill, finalize (``ok`` only with every expected step) and, on rank 0, write the result."""
        from utils.result import finalize_result, write_result

        if self.finished:
            return
        self.finished = True
        self.fill(self.result)
        done = len(self.result["step_times"])
        if self.stop_reason is not None and status == "ok":
            status, error = "failed", self.stop_reason
        if status == "ok" and done < self.expected_steps:
            status, error = "incomplete", f"only {done} of {self.expected_steps} steps ran"
        elif status != "ok":
            error = f"{error} ({done} of {self.expected_steps} steps done)"
        finalize_result(self.result, status, error)
        if self.path is not None:
            write_result(self.path, self.result)

    def finish_from_exception(self, exc: BaseException) -> None:
        """``incomplete`` for an interrupt, ``failed`` with the exception (OOM, NCCL, NaN check) otherwise."""
        name = type(exc).__name__
        interrupted = isinstance(exc, KeyboardInterrupt) or name in ("Interrupted", "SIGTERMException")
        device = self.stop_power()
        if device is not None:
            self.power_devices = [device.as_dict()]  # this GPU only: no collective after a failure
        reason = f"{name}: {exc}".strip().rstrip(":")
        self.finish("incomplete" if interrupted else "failed",
                    f"interrupted ({reason}) before the run finished" if interrupted else reason)


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


def _build_benchmark_callback_class() -> type:
    from lightning.pytorch.callbacks import Callback

    class BenchmarkCallback(Callback):
        """Times every optimizer step with the device synchronized, records loss/LR/memory/power.

        Loss comes from ``trainer.callback_metrics`` (NeMo logs ``reduced_train_loss``,
        sent to the first pipeline stage) or the step's output; LR is the optimizer's
        rate read at step start, i.e. the rate this step applied.
        """

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
            self.measurement.begin_step()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            metrics = trainer.callback_metrics
            loss = next((_lightning_scalar(metrics[k]) for k in self.measurement.loss_keys if k in metrics), None)
            if loss is None:
                loss = _lightning_scalar(outputs.get("loss") if isinstance(outputs, dict) else outputs)
            key = self.measurement.framework_time_key
            theirs = _lightning_scalar(metrics.get(key)) if key else None
            self.measurement.end_step(loss, self._lr, theirs)
            if self.measurement.stop_reason is not None:
                trainer.should_stop = True

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            device = self.measurement.stop_power()
            self.measurement.power_devices = self._gather(device)
            self.measurement.finish("ok", None)

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.measurement.finish_from_exception(exception)

        @staticmethod
        def _current_lr(trainer: Any) -> float | None:
            optimizers = getattr(trainer, "optimizers", None) or []
            groups = getattr(optimizers[0], "param_groups", None) if optimizers else None
            return _lightning_scalar(groups[0].get("lr")) if groups else None

        def _gather(self, device: Any) -> list[Any] | None:
            """Every rank's DeviceEnergy on rank 0 (a collective: all ranks reach train end)."""
            mine = device.as_dict() if device is not None else None
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                gathered: list[Any] = [None] * dist.get_world_size()
                dist.all_gather_object(gathered, mine)
                devices = gathered
            else:
                devices = [mine]
            return None if all(d is None for d in devices) else devices

    return BenchmarkCallback


_CALLBACK_CLASS: type | None = None


def benchmark_callback_class() -> type:
    """The Lightning ``BenchmarkCallback`` class (imports lightning on first use)."""
    global _CALLBACK_CLASS
    if _CALLBACK_CLASS is None:
        _CALLBACK_CLASS = _build_benchmark_callback_class()
    return _CALLBACK_CLASS


def __getattr__(name: str) -> Any:
    # ``from utils.monitor import BenchmarkCallback`` works wherever lightning is installed.
    if name == "BenchmarkCallback":
        return benchmark_callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
