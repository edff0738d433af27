"""evaluate/analysis/stats.py: the interval over repeated runs and the ratio interval, against hand computations."""

from __future__ import annotations

import math

import pytest

from evaluate.analysis.stats import estimate, pearson, ratio_estimate, t_critical


def test_t_interval_of_three_runs_by_hand() -> None:
    # runs 10, 12, 14: mean 12, sample sd 2, se 2/sqrt(3) = 1.1547; t(0.975, df=2) = 4.303
    # half-width 4.303 * 1.1547 = 4.9687 -> [7.0313, 16.9687]; the central value is the median, 12.
    est = estimate([14.0, 10.0, 12.0])
    assert est is not None
    assert est.value == 12.0 and est.n == 3
    assert est.low == pytest.approx(7.0313, abs=1e-3)
    assert est.high == pytest.approx(16.9687, abs=1e-3)
    assert est.format(1) == "12.0 [7.0, 17.0]"


def test_median_resists_one_slow_run() -> None:
    est = estimate([100.0, 101.0, 99.0, 40.0])
    assert est is not None
    assert est.value == 99.5  # median, not the mean 85
    assert est.low < 85 < est.high  # the interval widens to show the outlier


def test_single_run_has_no_interval_and_says_so() -> None:
    est = estimate([5377.0])
    assert est is not None and not est.has_interval
    assert est.format(0) == "5,377 (1 run)"
    assert estimate([]) is None
    assert estimate([float("nan"), 3.0]).value == 3.0  # type: ignore[union-attr]


def test_t_critical_table() -> None:
    assert t_critical(1) == 12.706
    assert t_critical(4) == 2.776
    assert t_critical(4.9) == 2.776  # Welch df rounded down: conservative
    assert t_critical(45) == 2.021  # between table rows: the smaller df's (larger) value
    assert t_critical(1000) == 1.960
    with pytest.raises(ValueError):
        t_critical(0.5)


def test_ratio_interval_by_hand() -> None:
    # a = 10, 12, 14 (mean 12, var 4); b = 5, 6, 7 (mean 6, var 1)
    # relative variances of the means: 4/(3*144) = 0.009259, 1/(3*36) = 0.009259; se = sqrt(0.018519) = 0.136083
    # Welch df = 0.018519^2 / (0.009259^2/2 * 2) = 4 -> t = 2.776; log(12/6) = 0.693147
    # interval exp(0.693147 -+ 2.776*0.136083) = [1.3716, 2.9163]; central value median(a)/median(b) = 2.0
    ratio = ratio_estimate([10.0, 12.0, 14.0], [5.0, 6.0, 7.0])
    assert ratio is not None
    assert ratio.value == 2.0
    assert ratio.low == pytest.approx(2.0 * math.exp(-2.776 * 0.136083), rel=1e-4)
    assert ratio.high == pytest.approx(2.0 * math.exp(2.776 * 0.136083), rel=1e-4)
    assert ratio.low == pytest.approx(1.3716, abs=1e-3)


def test_ratio_edge_cases() -> None:
    assert ratio_estimate([], [1.0]) is None
    single = ratio_estimate([3.0], [2.0, 2.2])
    assert single is not None and single.value == pytest.approx(1.5 / 1.05) and not single.has_interval
    exact = ratio_estimate([2.0, 2.0], [1.0, 1.0])
    assert exact is not None and (exact.low, exact.high) == (2.0, 2.0)


def test_pearson() -> None:
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None  # constant: undefined
    assert pearson([1, 2], [1, 2]) is None
