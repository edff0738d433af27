"""How far two loss curves of one model, initialisation and token stream drift apart by arithmetic alone.

The cross-vendor gate asks whether an AMD run trains the same model as an NVIDIA run. Kernels and reduction orders
differ, so the curves never match bit for bit; the tolerance is the drift such differences are measured to cause.
Two measures (``b`` the reference), over the common steps: ``max_step_gap``, the largest ``|a - b| / |b|``; and
``tail_gap``, ``|mean(a) - mean(b)| / |mean(b)|`` over the last :data:`TAIL_STEPS`. The tolerance is the largest
figure per measure (:func:`tolerance`):

* published: torchtitan's Llama 3 reference losses on CUDA and ROCm MI350X
  (``pytorch/torchtitan:tests/assets/losses`` at b5bcd76c, ``llama3_cuda.txt`` and ``llama3_rocm_mi350x.txt``,
  100 steps): 3.22% at step 70, 0.311% over steps 91-100. The Qwen3 MoE pair is no anchor: its files start from
  different losses (7.60 and 8.04), so not one initialisation;
* measured on cpu (``python -m bench.history_bench noise``, docs/PERFORMANCE.md): ``tran`` against ``deep`` 0.034% at
  most, 0.001% over the last 10 steps; 2 threads against 1 bitwise the same. Far below the published cross-vendor
  drift, which therefore sets the tolerance (tprimat's own AMD-vs-NVIDIA drift is not measured yet).
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
