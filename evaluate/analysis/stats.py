"""Run-to-run statistics: the median of repeated runs and a 95% interval around it.

The median of the runs (robust to one slow outlier) with the 95% Student-t interval of the mean: with 3 to 5 runs a
bootstrap only resamples the range and understates the uncertainty, the t-interval widens as it should. One run
has no interval and says so. A ratio is the ratio of medians with a Welch t-interval on its log (delta method), so
it is never narrower than either side's noise allows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% critical values of Student's t (0.975 quantile) by degrees of freedom.
# Non-integer (Welch) degrees of freedom are rounded down: the interval is then slightly
# conservative, never optimistic.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
    20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
    29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}
_Z975 = 1.960
INTERVAL_METHOD = "median of runs; 95% Student-t interval of the mean over runs (n >= 2)"
RATIO_METHOD = "ratio of medians; 95% Welch t-interval on the log ratio (delta method)"


def t_critical(df: float) -> float:
    """0.975 quantile of Student's t for ``df`` degrees of freedom (rounded down)."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df}: need at least 1")
    whole = math.floor(df)
    usable = [k for k in _T975 if k <= whole]
    return _T975[max(usable)] if whole <= 120 else _Z975


@dataclass(frozen=True)
class Estimate:
    """A central value with an optional 95% interval over ``n`` runs."""

    value: float
    low: float | None
    high: float | None
    n: int

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def format(self, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
        """``1,234.5 [1,200.0, 1,260.1]``; a single run shows ``1,234.5 (1 run)``; ``unit`` follows the value."""
        def fmt(x: float) -> str:
            return f"{x * scale:,.{digits}f}"

        if not self.has_interval:
            return f"{fmt(self.value)}{unit} (1 run)" if self.n == 1 else f"{fmt(self.value)}{unit}"
        return f"{fmt(self.value)}{unit} [{fmt(self.low)}, {fmt(self.high)}]"  # type: ignore[arg-type]


def estimate(values: Sequence[float]) -> Estimate | None:
    """Median of ``values`` and the 95% t-interval of their mean; None when empty."""
    data = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not data:
        return None
    center = statistics.median(data)
    if len(data) < 2:
        return Estimate(center, None, None, len(data))
    mean = statistics.fmean(data)
    half = t_critical(len(data) - 1) * statistics.stdev(data) / math.sqrt(len(data))
    return Estimate(center, mean - half, mean + half, len(data))


def ratio_estimate(numerator: Sequence[float], denominator: Sequence[float]) -> Estimate | None:
    """Ratio of medians with a Welch t-interval on log(mean_a / mean_b); None if either side is empty."""
    a = [float(v) for v in numerator if v is not None and math.isfinite(float(v)) and float(v) > 0]
    b = [float(v) for v in denominator if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not a or not b:
        return None
    center = statistics.median(a) / statistics.median(b)
    n = min(len(a), len(b))
    if len(a) < 2 or len(b) < 2:
        return Estimate(center, None, None, n)
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    # Relative variance of each mean (delta method for the log of a mean).
    va = statistics.variance(a) / (len(a) * mean_a**2)
    vb = statistics.variance(b) / (len(b) * mean_b**2)
    se = math.sqrt(va + vb)
    if se == 0:
        return Estimate(center, center, center, n)
    # Welch–Satterthwaite degrees of freedom.
    df = (va + vb) ** 2 / ((va**2) / (len(a) - 1) + (vb**2) / (len(b) - 1))
    half = t_critical(max(df, 1.0)) * se
    log_ratio = math.log(mean_a / mean_b)
    return Estimate(center, math.exp(log_ratio - half), math.exp(log_ratio + half), n)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation of two equally long series; None when undefined (constant or < 3 points)."""
    if len(x) != len(y) or len(x) < 3:
        return None
    try:
        return statistics.correlation(list(x), list(y))
    except statistics.StatisticsError:
        return None
