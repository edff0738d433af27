"""Effective settings and framework versions in the comparison and in validate (issue 10).

The comparison lists the effective settings that differ between the frameworks it compares,
puts a framework-version difference between two results of the same framework into its
fairness verdict, and validate fails a result whose effective settings contradict its workload.
Results are built through the real result API (tests/helpers/evaluate.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from evaluate.analysis.settings_diff import settings_differences
from evaluate.compare import main as compare_main
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from utils.schema.hardware import FrameworkVersions
from utils.schema.model import Result
from utils.schema.run import EffectiveSettings

COMMIT_A = "847781764fe468c90caec16309deded245c1022c"
COMMIT_B = "3cdfd613e68e8b734a3b9e28de579daaf81f4503"


def with_settings(settings: dict, commit: str | None = COMMIT_A):
    def mutate(result: Result) -> None:
        result.effective_settings = EffectiveSettings(settings=settings, resolved_by="test")
        result.framework_versions = FrameworkVersions(megatron_lm_commit=commit, torch="2.7.0")
    return mutate


def test_only_the_settings_that_differ_are_listed_per_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "mega", mutate=with_settings({"attention_backend": "auto", "global_batch_size": 64}))
    make_result(out, "nvd", "mega", mutate=with_settings({"attention_backend": "fused", "global_batch_size": 64,
                                                          "num_workers": 2}))
    (difference, absent) = settings_differences(load_directory(out).results)
    assert (difference.key, difference.values) == ("attention_backend", {"amd_mega_llama": "auto",
                                                                         "nvd_mega_llama": "fused"})
    assert absent.key == "num_workers" and absent.values["amd_mega_llama"] == "-"
    assert compare_main(["--results-dir", str(out)]) == 0
    console = capsys.readouterr().out
    assert "effective settings that differ (Llama 3.1 8B)" in console and "attention_backend" in console
    assert "global_batch_size" not in console.split("effective settings that differ")[1].split("==")[0]
    report = (out / "compare.md").read_text(encoding="utf-8")
    assert "## Effective settings that differ" in report and "| attention_backend | auto | fused |" in report
    # a setting only one framework has is kept out of the main table, in a collapsed section (issue 23)
    main, collapsed = report.split("<details>", 1)
    assert "num_workers" not in main.split("## Effective settings that differ")[1]
    assert "<summary>1 setting(s) only some" in collapsed and "| num_workers | - | 2 |" in collapsed.split(
        "</details>")[0]
    assert "num_workers" not in console and "1 more setting(s) only some frameworks have" in console


def test_a_framework_version_mismatch_is_in_the_fairness_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "mega", mutate=with_settings({}, COMMIT_A))
    make_result(out, "nvd", "mega", mutate=with_settings({}, COMMIT_B))
    report = check_fairness(load_directory(out).results)
    assert not report.fair
    (difference,) = [d for d in report.differences if d.key.startswith("framework_versions")]
    assert difference.key == "framework_versions.megatron_lm_commit (mega)"
    assert set(difference.values.values()) == {COMMIT_A, COMMIT_B} and not difference.unverifiable
    same = tmp_path / "same"
    make_result(same, "amd", "mega", mutate=with_settings({}, COMMIT_A))
    make_result(same, "nvd", "mega", mutate=with_settings({}, COMMIT_A))
    assert check_fairness(load_directory(same).results).fair


def test_an_unknown_framework_version_cannot_be_verified(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "mega", mutate=with_settings({}, COMMIT_A))

    def unknown(result: Result) -> None:
        result.framework_versions = FrameworkVersions(unknown={"megatron_lm_commit": "no recorded commit"})
    make_result(out, "nvd", "mega", mutate=unknown)
    (difference,) = [d for d in check_fairness(load_directory(out).results).differences
                     if d.key.startswith("framework_versions")]
    assert difference.unverifiable and "unknown (no recorded commit)" in difference.values["nvd_mega_llama"]


def test_validate_fails_settings_that_contradict_the_workload(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    path = make_result(out, "nvd", "mega", mutate=with_settings({"global_batch_size": 128, "seq_length": 2048}))
    assert validate_main([str(path)]) == 1
    text = capsys.readouterr().out
    assert "effective settings contradict the workload" in text and "global_batch_size=128" in text
    good = make_result(tmp_path / "good", "nvd", "mega", mutate=with_settings({"global_batch_size": 64}))
    assert validate_main([str(good)]) == 0
