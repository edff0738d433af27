"""Did the compared frameworks train the same model? A convergence check of their loss curves.

Identical settings and data are not enough: runs that do not learn alike give no like-for-like throughput. Per pair:
the gap of the tail's mean losses and Pearson's correlation; what cannot be judged says so, never a false FAIR.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from evaluate.analysis.stats import pearson
from evaluate.analysis.summary import GroupSummary, same_tokens
from utils.schema.model import Result

DEFAULT_BAND = 0.05
MIN_CORRELATION = 0.95
TAIL_FRACTION = 0.2
MIN_STEPS = 5
CANNOT_JUDGE = "cannot judge convergence"


@dataclass(frozen=True)
class CurveCheck:
    """The two curves' figures and verdict: ``fair`` True, False, or None (cannot judge, with ``reason``)."""

    steps: int
    tail_steps: int
    tail_means: tuple[float, float] | None
    gap: float | None
    correlation: float | None
    fair: bool | None
    reason: str
    band: float = DEFAULT_BAND
    min_correlation: float = MIN_CORRELATION

    @property
    def verdict(self) -> str:
        word = {True: "FAIR", False: "NOT FAIR", None: CANNOT_JUDGE}[self.fair]
        return f"{word}: {self.reason}"


def check_curves(first: Sequence[float | None], second: Sequence[float | None], *, band: float = DEFAULT_BAND,
                 min_correlation: float = MIN_CORRELATION) -> CurveCheck:
    """Compare two measured loss curves (step-aligned; None is a loss that was not finite)."""
    if not (math.isfinite(band) and band > 0):
        raise ValueError(f"convergence band {band!r}: must be a number above 0")
    steps = min(len(first), len(second))

    def undecided(reason: str, tail: int = 0) -> CurveCheck:
        return CurveCheck(steps, tail, None, None, None, None, reason, band, min_correlation)

    for name, curve in (("first", first), ("second", second)):
        bad = next((i for i, v in enumerate(curve[:steps]) if v is None or not math.isfinite(v)), None)
        if bad is not None:
            return undecided(f"the {name} curve has a non-finite loss at measured step {bad + 1}")
    if steps < MIN_STEPS:
        return undecided(f"{steps} common measured step(s): at least {MIN_STEPS} are needed")
    a, b = [float(v) for v in first[:steps]], [float(v) for v in second[:steps]]  # type: ignore[arg-type]
    tail = max(1, math.ceil(steps * TAIL_FRACTION))
    means = (statistics.fmean(a[-tail:]), statistics.fmean(b[-tail:]))
    scale = (abs(means[0]) + abs(means[1])) / 2
    gap = abs(means[0] - means[1]) / scale if scale > 0 else 0.0
    correlation = pearson(a, b)
    figures = (f"last {tail} of {steps} steps: mean loss {means[0]:.4f} vs {means[1]:.4f}, gap {gap:.1%} "
               f"(band {band:.0%})")
    if gap > band:
        return CurveCheck(steps, tail, means, gap, correlation, False, f"{figures}: outside the band", band,
                          min_correlation)
    if correlation is None:
        return CurveCheck(steps, tail, means, gap, None, None, f"{figures}; a constant curve has no correlation",
                          band, min_correlation)
    if correlation < min_correlation:
        return CurveCheck(steps, tail, means, gap, correlation, False,
                          f"{figures}; correlation {correlation:.3f} below {min_correlation}", band, min_correlation)
    return CurveCheck(steps, tail, means, gap, correlation, True, f"{figures}; correlation {correlation:.3f}",
                      band, min_correlation)


@dataclass(frozen=True)
class Convergence:
    """The convergence check of two result groups of one model."""

    model: str
    first: GroupSummary
    second: GroupSummary
    check: CurveCheck


def measured_losses(result: Result) -> list[float | None]:
    """The loss of every measured (post-warm-up) step."""
    skip = result.performance_metrics.skipped_steps if result.performance_metrics is not None else 0
    return list(result.loss_values[skip:])


def _samples_digest(result: Result) -> object:
    settings = result.effective_settings.settings if result.effective_settings is not None else {}
    return settings.get("samples_digest")


def same_workload(a: Result, b: Result) -> str | None:
    """None when the two runs trained on the same samples, else why their curves are not comparable."""
    digests = _samples_digest(a), _samples_digest(b)
    if None not in digests and digests[0] != digests[1]:
        return "samples digest differs: the runs did not train on the same samples"
    return same_tokens(a, b)


def convergence_checks(by_model: dict[str, list[GroupSummary]], *, band: float = DEFAULT_BAND,
                       min_correlation: float = MIN_CORRELATION) -> list[Convergence]:
    """Every pair of completed groups of one model and profile (first ok run of each)."""
    out = []
    for model in sorted(by_model):
        done = [s for s in by_model[model] if s.representative is not None]
        for i, a in enumerate(done):
            for b in done[i + 1:]:
                if a.group.profile != b.group.profile:
                    continue
                ra, rb = a.representative.result, b.representative.result  # type: ignore[union-attr]
                reason = same_workload(ra, rb)
                if reason is not None:
                    check = CurveCheck(0, 0, None, None, None, None, reason, band, min_correlation)
                else:
                    check = check_curves(measured_losses(ra), measured_losses(rb), band=band,
                                         min_correlation=min_correlation)
                out.append(Convergence(model, a, b, check))
    return out


def overall(checks: Sequence[Convergence]) -> str:
    """One line for the report's head: NOT FAIR if any pair diverges, else FAIR or cannot judge."""
    if not checks:
        return f"{CANNOT_JUDGE}: fewer than two completed results of one model"
    diverged = [c for c in checks if c.check.fair is False]
    if diverged:
        return f"NOT FAIR: {len(diverged)} of {len(checks)} pair(s) of loss curves diverge"
    undecided = [c for c in checks if c.check.fair is None]
    if undecided:
        return f"{CANNOT_JUDGE} for {len(undecided)} of {len(checks)} pair(s); the others agree"
    return f"FAIR: all {len(checks)} pair(s) of loss curves agree"
