"""compare refuses results that decayed the LR over another horizon or used another Adam epsilon (issue 35).

LR_DECAY_ITERS and ADAM_EPS are fairness keys the workload block does not carry; each result records
what its framework resolved (``effective_settings``), and evaluate/analysis/fairness.py compares those.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from tests.helpers.evaluate import make_result
from utils.schema.run import EffectiveSettings

IDENTICAL = {"lr_decay_iters": 30, "adam_eps": 1e-8}


def _report(tmp_path: Path, settings: dict[str, dict | None]):
    """One nvd llama result per framework, with these resolved settings (None: no effective settings)."""
    out = tmp_path / "output"
    for framework, resolved in settings.items():
        block = None if resolved is None else EffectiveSettings(settings=resolved, resolved_by="test")
        make_result(out, "nvd", framework, mutate=lambda result, block=block: setattr(result, "effective_settings",
                                                                                      block))
    return check_fairness(load_directory(out).results)


def test_the_same_horizon_and_epsilon_are_fair_whatever_parser_spelled_them(tmp_path: Path) -> None:
    assert _report(tmp_path, {"mega": IDENTICAL, "nemo": {"lr_decay_iters": 30, "adam_eps": 1.0000000000001e-8},
                              "tran": IDENTICAL}).fair


@pytest.mark.parametrize(("key", "setting", "other"), [("LR_DECAY_ITERS", "lr_decay_iters", 1_200_000),
                                                       ("ADAM_EPS", "adam_eps", 1e-5)])
def test_another_horizon_or_epsilon_is_not_one_workload(tmp_path: Path, key, setting, other) -> None:
    report = _report(tmp_path, {"mega": {**IDENTICAL, setting: other}, "tran": IDENTICAL})
    assert not report.fair
    (difference,) = report.differences
    assert difference.key == key and not difference.unverifiable
    assert f"{key} differs" in difference.describe() and str(other) in difference.describe()


def test_a_result_without_them_among_others_cannot_be_verified(tmp_path: Path) -> None:
    report = _report(tmp_path, {"mega": IDENTICAL, "tran": None})
    assert {d.key for d in report.differences} >= {"LR_DECAY_ITERS", "ADAM_EPS"}
    (eps,) = [d for d in report.differences if d.key == "ADAM_EPS"]
    assert eps.unverifiable and "no adam_eps in its effective settings" in eps.describe()


def test_results_that_all_predate_them_are_judged_without_them(tmp_path: Path) -> None:
    assert _report(tmp_path, {"mega": None, "tran": None}).fair
