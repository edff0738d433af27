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
