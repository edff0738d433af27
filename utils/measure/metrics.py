"""Metrics: per-step arrays -> the result's performance, memory and framework-reported blocks.

The one place throughput, FLOPs and MFU are computed, whatever measured the steps, so every framework is judged by the
same arithmetic; an unknown peak leaves MFU ``None`` with the reason (never guessed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from utils.schema.hardware import GpuInfo
from utils.schema.measures import (
    Disagreement,
    FlopPair,
    FlopsPerToken,
    FrameworkReported,
    MemoryMetrics,
    PerformanceMetrics,
    StepStats,
)
from utils.spec.models import ModelShape, flops_per_token, mfu

DISAGREEMENT_TOLERANCE = 0.05
THROUGHPUT_BASIS = "GBS * SL / median step time over measured steps"


def finite(value: float | None) -> float | None:
    """``value`` when it is a finite number, else ``None`` (JSON has no NaN)."""
    return float(value) if value is not None and math.isfinite(value) else None


def step_stats(values: Sequence[float]) -> StepStats | None:
    """mean, median, std (sample), min, max, p5, p95 of ``values``; None when empty."""
    data = sorted(float(v) for v in values)
    if not data:
        return None

    def percentile(q: float) -> float:
        # Linear interpolation between closest ranks (numpy's default method).
        position = (len(data) - 1) * q
        low, high = math.floor(position), math.ceil(position)
        return data[low] + (data[high] - data[low]) * (position - low)

    return StepStats(
        mean=statistics.fmean(data), median=statistics.median(data),
        std=statistics.stdev(data) if len(data) > 1 else 0.0, min=data[0], max=data[-1],
        p5=percentile(0.05), p95=percentile(0.95), count=len(data),
    )


def peak_for(gpu_info: GpuInfo, fp8: bool) -> tuple[float | None, str, str | None]:
    """(peak TFLOP/s, precision it is for, reason when unknown) for the precision the run used."""
    precision = "fp8" if fp8 else "bf16"
    peak = getattr(gpu_info.peak_tflops, precision)
    reason = None if peak is not None else (gpu_info.peak_tflops_reason or f"no {precision} peak for this device")
    return peak, precision, reason


def performance_metrics(
    step_times: Sequence[float | None],
    *,
    skip_steps: int,
    global_batch_size: int | None,
    seq_len: int | None,
    world_size: int | None,
    shape: ModelShape,
    peak_tflops: float | None,
    peak_reason: str | None,
    peak_precision: str = "bf16",
) -> PerformanceMetrics:
    """Summary of the measured (post-warm-up) steps: step time, throughput, FLOPs, MFU. ``global_batch_size``,
    ``seq_len`` or ``world_size`` may be unknown (a foreign log): the figures that need them are then ``None`` and
    ``mfu_reason`` says which."""
    recorded = [t for t in step_times if t is not None and math.isfinite(t)]
    measured = [t for t in step_times[skip_steps:] if t is not None and math.isfinite(t)]
    stats = step_stats(measured)
    missing = [name for name, value in (("GBS", global_batch_size), ("SL", seq_len), ("world size", world_size))
               if value is None]
    tokens_per_step = global_batch_size * seq_len if global_batch_size and seq_len else None
    flops = None
    if seq_len:
        per_token = flops_per_token(shape, seq_len)
        flops = FlopsPerToken(full=per_token.full, causal=per_token.causal,
                              convention=per_token.as_dict()["convention"])
    reason = peak_reason if peak_tflops is None else None
    block = PerformanceMetrics(
        measured_steps=len(measured), skipped_steps=min(skip_steps, len(step_times)),
        step_time_seconds=stats, avg_step_time_seconds=stats.mean if stats else None,
        median_step_time_seconds=stats.median if stats else None,
        total_time_seconds=math.fsum(recorded) if recorded else None,
        tokens_per_step=tokens_per_step, tokens_per_second=None, tokens_per_second_per_gpu=None,
        steps_per_second=None, flops_per_token=flops, tflops_per_gpu=None, peak_tflops=peak_tflops,
        peak_precision=peak_precision, mfu=None, mfu_reason=reason or "MFU not computed",
        throughput_basis=THROUGHPUT_BASIS,
    )
    if not stats or stats.median <= 0:
        block.mfu_reason = "no measured steps: throughput and MFU not computed"
        return block
    block.steps_per_second = 1.0 / stats.median
    if missing:
        block.mfu_reason = f"{', '.join(missing)} unknown: throughput and MFU not computed"
        return block
    assert tokens_per_step is not None and world_size is not None and flops is not None
    tps = tokens_per_step / stats.median
    per_gpu = tps / world_size
    block.tokens_per_second = tps
    block.tokens_per_second_per_gpu = per_gpu
    block.tflops_per_gpu = FlopPair(full=per_gpu * flops.full / 1e12, causal=per_gpu * flops.causal / 1e12)
    if peak_tflops is not None:
        block.mfu = FlopPair(full=mfu(per_gpu, flops.full, peak_tflops), causal=mfu(per_gpu, flops.causal, peak_tflops))
        block.mfu_reason = None
    return block


def memory_metrics(
    allocated_gb: Sequence[float | None],
    *,
    peak_allocated_gb: float | None = None,
    peak_reserved_gb: float | None = None,
    total_memory_gb: float | None = None,
    reason: str | None = None,
    basis: str | None = None,
    device_used_gb: Sequence[float] = (),
    device_used_measured_gb: Sequence[float] = (),
    device_used_basis: str | None = None,
) -> MemoryMetrics:
    """Memory summary; values not measured are null and ``reason`` says why. ``allocated_gb`` is the per-step allocator
    array; ``device_used_gb`` is a device-wide figure some logs print (Primus's ``hip mem usage``), kept apart because
    it includes the caching allocator's reserve."""
    values = [v for v in allocated_gb if v is not None]
    peak = peak_allocated_gb if peak_allocated_gb is not None else (max(values) if values else None)
    used = list(device_used_gb)
    measured_used = list(device_used_measured_gb) or used
    return MemoryMetrics(
        avg_allocated_gb=statistics.fmean(values) if values else None,
        peak_allocated_gb=peak, peak_reserved_gb=peak_reserved_gb, total_memory_gb=total_memory_gb,
        basis=basis if peak is not None else None,
        device_used_peak_gb=max(used) if used else None,
        device_used_mean_measured_gb=statistics.fmean(measured_used) if measured_used else None,
        device_used_basis=device_used_basis if used else None,
        reason=None if peak is not None or used else (reason or "device memory was not measured"),
    )


def disagreement(ours: float | None, theirs: float | None, metric: str,
                 tolerance: float = DISAGREEMENT_TOLERANCE) -> Disagreement | None:
    """Our figure against the framework's own; flagged when the gap exceeds ``tolerance`` of ours."""
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return None
    gap = abs(ours - theirs) / ours
    return Disagreement(metric=metric, ours=ours, theirs=theirs, relative_gap=gap, tolerance=tolerance,
                        flagged=gap > tolerance)


def framework_reported(
    ours: PerformanceMetrics,
    *,
    source: str,
    median_step_time_seconds: float | None = None,
    tflops_per_gpu: float | None = None,
    tokens_per_second_per_gpu: float | None = None,
    running_average: dict[str, float | None] | None = None,
) -> FrameworkReported:
    """The framework's own figures (medians over the measured steps) beside ours. TFLOP/s is compared with the nearer of
    our two FLOP conventions (releases differ in which they count) and flagged only when it agrees with neither within
    5%; step time and tokens/s are compared directly."""
    found: list[Disagreement] = []
    step = disagreement(ours.median_step_time_seconds, median_step_time_seconds, "median step time (s)")
    if step is not None:
        found.append(step)
    if tflops_per_gpu is not None and ours.tflops_per_gpu is not None:
        candidates = [d for d in (disagreement(getattr(ours.tflops_per_gpu, conv), tflops_per_gpu,
                                               f"tflops_per_gpu ({conv})") for conv in ("full", "causal"))
                      if d is not None]
        if candidates:
            nearest = min(candidates, key=lambda d: d.relative_gap)
            nearest.other_conventions = [d for d in candidates if d is not nearest]
            found.append(nearest)
    tokens = disagreement(ours.tokens_per_second_per_gpu, tokens_per_second_per_gpu, "tokens_per_second_per_gpu")
    if tokens is not None:
        found.append(tokens)
    return FrameworkReported(
        source=source, median_step_time_seconds=median_step_time_seconds, tflops_per_gpu=tflops_per_gpu,
        tokens_per_second_per_gpu=tokens_per_second_per_gpu,
        running_average={k: finite(v) for k, v in (running_average or {}).items()},
        disagreements=found, flagged=any(d.flagged for d in found),
    )
