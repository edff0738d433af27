"""The comparison over identical and tuned results: both ratios side by side, never mixed, fairness per profile.

Every result is built through the real result API (tests/helpers/evaluate.py), the tuned ones
with their vendor recipe applied as the launcher applies it (train/profiles/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.references import match_references
from evaluate.analysis.results import load_directory
from evaluate.analysis.stats import ratio_estimate
from evaluate.analysis.summary import best_vs_best, platform_ratios, summarize_group
from evaluate.analysis.validation import validate_paths
from evaluate.compare import main as compare_main
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from train.profiles import amd, nvd
from utils.result.file import read_result
from utils.schema.run import EffectiveSettings


def tps(path: Path) -> float:
    return json.loads(path.read_text())["performance_metrics"]["tokens_per_second_per_gpu"]


@pytest.fixture
def both_profiles(tmp_path: Path) -> dict[str, Path]:
    """Identical and tuned runs of four vendor jobs, one directory; AMD Primus and NVIDIA mega fastest tuned."""
    out = tmp_path / "out"
    runs = {
        "amd_prim": make_result(out, "amd", "prim", step_time=1.2, seed=1),
        "nvd_nemo": make_result(out, "nvd", "nemo", step_time=1.5, seed=2),
        "amd_prim_tuned": make_result(out, "amd", "prim", step_time=8.0, seed=3, PROFILE="tuned"),
        "amd_mega_tuned": make_result(out, "amd", "mega", step_time=9.0, seed=4, PROFILE="tuned"),
        "nvd_nemo_tuned": make_result(out, "nvd", "nemo", step_time=12.0, seed=5, PROFILE="tuned"),
        "nvd_mega_tuned": make_result(out, "nvd", "mega", step_time=11.0, seed=6, PROFILE="tuned"),
    }
    return runs


def test_results_of_both_profiles_live_side_by_side(both_profiles):
    assert both_profiles["amd_prim"].name == "train_amd_prim_llama.json"
    assert both_profiles["amd_prim_tuned"].name == "train_amd_prim_llama_tuned.json"
    tuned = read_result(both_profiles["nvd_mega_tuned"])
    assert tuned.profile == "tuned" and tuned.profile_settings.recipe == nvd.LLAMA3_8B_H100.id
    workload = tuned.training_config.workload
    assert (workload.SL, workload.MBS, workload.GBS, workload.CP, workload.DP, workload.GA) == (8192, 1, 128, 2, 4, 32)


def test_fairness_compares_each_profile_apart_and_tuned_runs_against_their_recipes(both_profiles):
    report = check_fairness(load_directory(next(iter(both_profiles.values())).parent).results)
    assert report.fair, [d.describe() for d in report.differences]
    assert set(report.profiles["llama"]) == {"identical", "tuned"}
    assert sorted(report.profiles["llama"]["tuned"]) == ["amd_mega_llama_tuned", "amd_prim_llama_tuned",
                                                         "nvd_mega_llama_tuned", "nvd_nemo_llama_tuned"]
    assert report.recipes["amd_prim_llama_tuned"] == amd.LLAMA31_8B_MI300X.id
    verdict = report.verdict()
    assert verdict.startswith("FAIR: identical profile: identical workload") and "never mixed" in verdict
    assert amd.LLAMA31_8B_MI300X.id in verdict and nvd.LLAMA3_8B_H100.id in verdict


def test_ratios_never_cross_profiles_and_best_is_each_vendors_fastest(both_profiles):
    groups = [summarize_group(g) for g in load_directory(both_profiles["amd_prim"].parent).groups()["llama"]]
    identical = platform_ratios(groups)
    assert [(r.numerator.group.label, r.denominator.group.label) for r in identical] == [("amd/prim", "nvd/nemo")]
    assert identical[0].value.value == pytest.approx(tps(both_profiles["amd_prim"]) / tps(both_profiles["nvd_nemo"]))
    best = best_vs_best(groups)
    assert (best.ratio.numerator.group.label, best.ratio.denominator.group.label) == (
        "amd/prim (tuned)", "nvd/mega (tuned)")
    assert best.ratio.value.value == pytest.approx(
        tps(both_profiles["amd_prim_tuned"]) / tps(both_profiles["nvd_mega_tuned"]))
    diffs = {d.key: (d.first, d.second) for d in best.differences}
    assert diffs["recipe"] == (amd.LLAMA31_8B_MI300X.id, nvd.LLAMA3_8B_H100.id)
    assert diffs["MBS"] == (2, 1) and diffs["CP"] == (1, 2) and diffs["GA"] == (8, 32)
    assert diffs["enable_primus_turbo"] == (True, None) and diffs["manual_gc"] == (None, True)
    assert diffs["env NCCL_NVLS_ENABLE"] == (None, "0")
    assert "SL" not in diffs and "GBS" not in diffs and "overlap_grad_reduce" not in diffs  # equal: not listed


def test_compare_md_shows_both_ratios_side_by_side_with_the_differing_settings(both_profiles, capsys):
    out = both_profiles["amd_prim"].parent
    assert compare_main(["--results-dir", str(out)]) == 0
    stdout = capsys.readouterr().out
    report = (out / "compare.md").read_text()
    identical = ratio_estimate([tps(both_profiles["amd_prim"])], [tps(both_profiles["nvd_nemo"])])
    best = ratio_estimate([tps(both_profiles["amd_prim_tuned"])], [tps(both_profiles["nvd_mega_tuned"])])
    table = report[report.index("### AMD / NVIDIA throughput ratio"):]
    rows = [line for line in table.splitlines() if line.startswith("| identical") or line.startswith("| tuned")]
    assert rows == [
        f"| identical | AMD Primus | NVIDIA NeMo | {identical.value:,.3f}x (1 run) | faster on AMD |",
        f"| tuned, best vs best | AMD Primus (tuned) | NVIDIA Megatron-LM (tuned) | {best.value:,.3f}x (1 run) "
        "| faster on AMD |",
    ]
    assert ("Settings that differ between the two tuned runs (AMD Primus (tuned) vs NVIDIA Megatron-LM (tuned))"
            in report)
    assert f"| recipe | {amd.LLAMA31_8B_MI300X.id} | {nvd.LLAMA3_8B_H100.id} |" in report
    assert "| MBS | 2 | 1 |" in report and "| enable_primus_turbo | True | not recorded" in report
    assert "### Tuned runs: the vendor recipe each ran" in report
    assert f"| NVIDIA NeMo (tuned) | {nvd.LLAMA3_8B_H100.title} |" in report
    assert f"AMD/NVIDIA best vs best (tuned) AMD Primus (tuned) vs NVIDIA Megatron-LM (tuned): {best.value:,.3f}x" \
        in stdout
    # no ratio ever pairs a tuned run with an identical one
    for line in report.splitlines():
        if "faster on" in line:
            assert line.count("(tuned)") in (0, 2), line


def test_a_tuned_run_that_does_not_match_its_recipe_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    make_result(out, "amd", "prim", PROFILE="tuned")

    def ran_other_overlap(result):
        result.effective_settings = EffectiveSettings(settings={"overlap_grad_reduce": False}, resolved_by="test")

    make_result(out, "nvd", "nemo", PROFILE="tuned", mutate=ran_other_overlap)
    assert compare_main(["--results-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert (f"[llama, tuned] recipe does not match: nvd_nemo_llama_tuned=overlap_grad_reduce=False but recipe "
            f"{nvd.LLAMA3_8B_H100.id} states True") in err
    report = validate_paths([out])
    nemo = next(c for c in report.checks if c.path.name == "train_nvd_nemo_llama_tuned.json")
    assert any(e.startswith("tuned run overlap_grad_reduce=False") for e in nemo.errors)


def test_tuned_runs_must_share_data_and_algorithm_but_not_the_recipes_keys(tmp_path):
    out = tmp_path / "out"
    make_result(out, "amd", "mega", PROFILE="tuned", LR="1e-4")
    make_result(out, "nvd", "mega", PROFILE="tuned", data_content=b"other")
    keys = {d.key for d in check_fairness(load_directory(out).results).differences}
    assert keys == {"LR", "data hash"}  # SL, MBS, GBS, CP, DP, GA differ by recipe and are not named


def test_a_tuned_result_without_its_recipe_cannot_be_verified(tmp_path, capsys):
    out = tmp_path / "out"
    make_result(out, "nvd", "nemo", PROFILE="tuned", mutate=lambda r: setattr(r, "profile_settings", None))
    report = check_fairness(load_directory(out).results)
    (difference,) = report.differences
    assert difference.unverifiable and difference.describe().startswith("[llama, tuned] recipe cannot verify")
    assert validate_main([str(out)]) == 1
    assert "tuned run records no vendor recipe" in capsys.readouterr().out


def test_a_fallback_run_is_an_identical_run_that_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    path = make_result(out, "amd", "tran", PROFILE="tuned", PROFILE_FALLBACK="identical")
    result = read_result(path)
    assert path.name == "train_amd_tran_llama.json" and result.profile == "identical"
    assert result.profile_settings.requested == "tuned" and "no vendor recipe" in result.profile_settings.fallback
    make_result(out, "nvd", "tran")
    assert check_fairness(load_directory(out).results).fair
    assert validate_main([str(path)]) == 0
    assert "PROFILE=tuned was requested but the identical profile ran" in capsys.readouterr().out


def test_references_flag_only_tuned_runs(tmp_path):
    out = tmp_path / "out"
    tuned = read_result(make_result(out, "nvd", "nemo", step_time=30.0, PROFILE="tuned"))
    matched = {m.reference.id: m for m in match_references(tuned, tuned.performance_metrics.tokens_per_second_per_gpu)}
    assert set(matched) == {"dgxc-v25.02-llama31-8b-h100-bf16", "dgxc-v25.04.02-llama31-8b-h100-bf16"}
    assert all(m.flagged and m.verdict().startswith("LIKELY MISCONFIGURED") for m in matched.values())
    # the identical profile at the same SL and GBS is shown beside the reference, never flagged
    same_shape = read_result(make_result(out, "nvd", "mega", step_time=30.0, SL="8192", GA="16"))
    shown = match_references(same_shape, same_shape.performance_metrics.tokens_per_second_per_gpu)
    assert shown and not any(m.flagged for m in shown)
    assert all("identical profile: not the vendor's configuration" in m.verdict() for m in shown)
    # AMD's Qwen recipe (SL 2048, GBS 640) matches no Llama reference
    qwen = read_result(make_result(out, "amd", "prim", "qwen", PROFILE="tuned"))
    assert match_references(qwen, 1000.0) == []


def test_best_vs_best_needs_a_tuned_run_on_each_side(tmp_path):
    out = tmp_path / "out"
    make_result(out, "amd", "prim", PROFILE="tuned")
    make_result(out, "nvd", "nemo")
    groups = [summarize_group(g) for g in load_directory(out).groups()["llama"]]
    assert best_vs_best(groups) is None and platform_ratios(groups) == []
