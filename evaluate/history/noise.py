"""How far two loss curves of one model, initialisation and token stream drift apart by arithmetic alone.

The cross-vendor gate's tolerance: kernels and reduction orders differ, so curves never match bit for bit.
``max_step_gap`` is the largest ``|a - b| / |b|`` over the common steps, ``tail_gap`` the gap of the means over the
last :data:`TAIL_STEPS`; the tolerance is the largest figure per measure of :data:`FIGURES` (published torchtitan
CUDA vs ROCm losses, and tprimat's own cpu measurements, far below them: docs/PERFORMANCE.md). torchtitan's Qwen3
MoE pair is no anchor: its files start from different losses, so not one initialisation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from evaluate.analysis.stats import pearson

TAIL_STEPS = 10


@dataclass(frozen=True)
class NoiseFigure:
    """The drift between two curves that should be the same, with where it comes from."""

    name: str
    max_step_gap: float
    tail_gap: float
    steps: int
    source: str


PUBLISHED = NoiseFigure(
    "torchtitan Llama 3: CUDA vs ROCm MI350X reference losses", 0.0322, 0.00311, 100,
    "pytorch/torchtitan@b5bcd76c66d0acb1a08b176d9639425bc55e0b2a tests/assets/losses/llama3_cuda.txt vs "
    "tests/assets/losses/llama3_rocm_mi350x.txt")

# Measured on this project's cpu platform (docs/PERFORMANCE.md, "History: loss noise on cpu"): tiny Llama,
# 50 steps, SL 64, GBS 4, the sample dataset, seed 42, fp32 on cpu.
MEASURED: tuple[NoiseFigure, ...] = (
    NoiseFigure("cpu: deep (DeepSpeed ZeRO-1) vs tran (plain PyTorch), same init and samples", 0.000344, 0.0000105,
                50, "python -m bench.history_bench noise --steps 50 (docs/PERFORMANCE.md)"),
    NoiseFigure("cpu: tran at 1 thread vs 2 threads", 0.0, 0.0, 50,
                "python -m bench.history_bench noise --steps 50 (docs/PERFORMANCE.md): bitwise identical"),
)

FIGURES: tuple[NoiseFigure, ...] = (PUBLISHED, *MEASURED)


@dataclass(frozen=True)
class Gaps:
    steps: int
    max_step_gap: float
    max_step: int
    tail_gap: float
    correlation: float | None


def curve_gaps(steps: Sequence[int], a: Sequence[float], b: Sequence[float]) -> Gaps:
    """The two measures (and Pearson's r) of ``a`` against the reference ``b``, step-aligned, all finite."""
    if not (len(steps) == len(a) == len(b)) or not steps:
        raise ValueError("curve_gaps needs equally long, non-empty step-aligned curves")
    gaps = [abs(x - y) / abs(y) if y != 0 else abs(x) for x, y in zip(a, b, strict=True)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    tail = min(TAIL_STEPS, len(a))
    mean_a, mean_b = statistics.fmean(a[-tail:]), statistics.fmean(b[-tail:])
    tail_gap = abs(mean_a - mean_b) / abs(mean_b) if mean_b != 0 else abs(mean_a)
    correlation = pearson(a, b)
    if correlation is not None and not math.isfinite(correlation):
        correlation = None
    return Gaps(len(a), gaps[worst], steps[worst], tail_gap, correlation)


def tolerance(figures: Sequence[NoiseFigure] = FIGURES) -> tuple[float, float]:
    """(per-step, last-10-steps) tolerance: the largest drift measured or published for each measure."""
    return max(f.max_step_gap for f in figures), max(f.tail_gap for f in figures)
