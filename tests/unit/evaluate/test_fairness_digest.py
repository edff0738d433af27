"""compare refuses results whose fed samples differ: the samples digest in effective_settings."""

from __future__ import annotations

from pathlib import Path

from evaluate.analysis.fairness import DIGEST_KEY, check_fairness
from evaluate.analysis.results import load_directory
from tests.helpers.evaluate import make_result
from utils.schema.model import Result
from utils.schema.run import EffectiveSettings

SAME = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def _digest(value: str | None):
    def mutate(result: Result) -> None:
        settings = {} if value is None else {DIGEST_KEY: value}
        result.effective_settings = EffectiveSettings(settings=settings, resolved_by="test")
    return mutate


def _report(tmp_path: Path, digests: dict[str, str | None]):
    out = tmp_path / "output"
    for framework, digest in digests.items():
        make_result(out, "nvd", framework, mutate=_digest(digest))
    return check_fairness(load_directory(out).results)


def test_equal_digests_are_fair(tmp_path: Path) -> None:
    assert _report(tmp_path, {"mega": SAME, "tran": SAME}).fair


def test_differing_digests_are_not_a_fair_comparison_and_name_the_digest(tmp_path: Path) -> None:
    report = _report(tmp_path, {"mega": OTHER, "tran": SAME})
    assert not report.fair
    (difference,) = [d for d in report.differences if d.key == DIGEST_KEY]
    assert not difference.unverifiable
    text = difference.describe()
    assert f"{DIGEST_KEY} differs" in text and "sha256:bbbbbbbbbbbb" in text and "sha256:aaaaaaaaaaaa" in text


def test_one_result_without_a_digest_cannot_be_verified(tmp_path: Path) -> None:
    report = _report(tmp_path, {"mega": None, "tran": SAME})
    (difference,) = [d for d in report.differences if d.key == DIGEST_KEY]
    assert difference.unverifiable and "no samples_digest recorded" in difference.describe()


def test_results_that_all_predate_the_digest_are_judged_without_it(tmp_path: Path) -> None:
    assert _report(tmp_path, {"mega": None, "tran": None}).fair
