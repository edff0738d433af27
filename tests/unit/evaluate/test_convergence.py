"""evaluate/analysis/convergence.py: the loss-curve convergence check, and its verdict in compare.md and the console."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evaluate.analysis.convergence import CANNOT_JUDGE, check_curves
from evaluate.compare import main as compare_main
from tests.helpers.evaluate import make_result


def decaying(steps: int, start: float = 11.0, end: float = 6.5, wiggle: float = 0.0) -> list[float]:
    return [start + (end - start) * (i / (steps - 1)) ** 0.5 + wiggle * math.sin(i) for i in range(steps)]


def test_two_curves_within_the_band_are_fair() -> None:
    check = check_curves(decaying(40), decaying(40, end=6.6, wiggle=0.01))
    assert check.fair is True and check.gap < 0.05 and check.correlation > 0.99
    assert check.tail_steps == 8 and check.steps == 40  # the last 20% of the measured steps


def test_two_curves_outside_the_band_are_not_fair() -> None:
    check = check_curves(decaying(40, end=6.0), decaying(40, end=7.0))
    assert check.fair is False and check.gap > 0.05 and "outside the band" in check.verdict
    assert check.verdict.startswith("NOT FAIR")


def test_uncorrelated_curves_within_the_band_are_not_fair() -> None:
    flat = [7.0 + 0.05 * math.sin(i) for i in range(40)]
    noisy = [7.0 + 0.05 * math.cos(3 * i) for i in range(40)]
    check = check_curves(flat, noisy)
    assert check.gap < 0.05 and check.correlation < 0.95 and check.fair is False
    assert "correlation" in check.reason


def test_the_band_is_configurable() -> None:
    a, b = decaying(40, end=6.0), decaying(40, end=6.5)  # about 8% apart at the end
    assert check_curves(a, b).fair is False
    assert check_curves(a, b, band=0.10).fair is True
    with pytest.raises(ValueError):
        check_curves(a, b, band=float("nan"))


@pytest.mark.parametrize("bad", [float("nan"), None, float("inf")])
def test_a_non_finite_loss_cannot_be_judged(bad: float | None) -> None:
    curve = decaying(20)
    curve[7] = bad  # type: ignore[call-overload]
    check = check_curves(curve, decaying(20))
    assert check.fair is None and check.verdict.startswith(CANNOT_JUDGE) and "step 8" in check.reason


def test_a_single_step_cannot_be_judged() -> None:
    check = check_curves([6.44], [7.33])
    assert check.fair is None and CANNOT_JUDGE in check.verdict and check.gap is None
    assert check_curves([], []).fair is None


def test_a_constant_curve_cannot_be_judged_by_correlation() -> None:
    check = check_curves([7.0] * 10, [7.01] * 10)
    assert check.fair is None and "constant" in check.reason


def test_the_h100_case_from_issue_23_is_not_fair() -> None:
    """tran ended at 6.44, mega at 7.33 after agreeing at the start: a 13% gap that said FAIR."""
    tran = decaying(48, start=10.9, end=6.44)  # the measured steps (after the agreeing warm-up)
    mega = decaying(48, start=10.9, end=7.33)
    check = check_curves(tran, mega)
    assert check.fair is False and check.correlation > 0.95  # correlated, yet far apart
    assert check.gap == pytest.approx(0.12, abs=0.02)


def _losses_offset_from(step: int, offset: float):
    def mutate(result) -> None:
        result.loss_values = [v + (offset if i >= step else 0.0) for i, v in enumerate(result.loss_values)]
    return mutate


def test_compare_marks_diverging_frameworks_not_fair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", seed=1)
    make_result(out, "nvd", "tran", seed=2, mutate=_losses_offset_from(10, 0.9))
    assert compare_main(["--results-dir", str(out)]) == 0  # written, and marked
    report = (out / "compare.md").read_text()
    assert "**Convergence check: NOT FAIR: 1 of 1 pair(s) of loss curves diverge**" in report
    assert "WARNING: NOT FAIR: the loss curves" in report.splitlines()[0]
    assert "## Convergence of the loss curves" in report and "outside the band" in report
    console = capsys.readouterr().out
    assert "convergence: NOT FAIR" in console and "outside the band" in console


def test_compare_agreeing_frameworks_are_fair_and_the_band_flag_is_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", seed=1)
    make_result(out, "nvd", "tran", seed=2)
    assert compare_main(["--results-dir", str(out)]) == 0
    report = (out / "compare.md").read_text()
    assert "**Convergence check: FAIR: all 1 pair(s) of loss curves agree**" in report
    assert "WARNING: NOT FAIR" not in report
    with pytest.raises(SystemExit) as exc:
        compare_main(["--results-dir", str(out), "--convergence-band", "0"])
    assert exc.value.code == 2
    capsys.readouterr()
