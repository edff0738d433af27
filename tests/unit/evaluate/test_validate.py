"""evaluate/validate.py and evaluate/analysis/fairness.py: sanity checks and the fairness check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from utils.result.file import update_result
from utils.schema.measures import FlopPair
from utils.schema.model import Result
from utils.schema.run import Workload


def run_validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = validate_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_valid_results_pass_with_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim", run_index=1, seed=1)
    make_result(out, "nvd", "nemo", run_index=1, seed=2)
    code, stdout, _ = run_validate(capsys, str(out), "--json")
    report = json.loads(stdout)
    assert code == 0, stdout
    assert report["valid"] is True
    assert [r["valid"] for r in report["results"]] == [True, True]
    assert report["fairness"]["fair"] is True
    assert report["fairness"]["compared"] == {"llama": ["amd_prim_llama_r1", "nvd_nemo_llama_r1"]}


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: setattr(r.performance_metrics, "tokens_per_second", r.performance_metrics.tokens_per_second * 1.05),
         "disagrees with GBS*SL/median step time"),
        (lambda r: setattr(r.performance_metrics, "mfu", FlopPair(full=1.2, causal=1.1)), "exceeds 100%"),
        (lambda r: r.loss_values.__setitem__(7, None), "non-finite loss value(s) at step(s) 8"),
        (lambda r: r.loss_values.reverse(), "loss not decreasing on average"),
        (lambda r: r.loss_values.__setitem__(4, -0.5), "loss -0.5 at step 5: a cross-entropy is between 0 and"),
        # the per-step arrays have one length (utils/schema/model.py), so all of them go
        (lambda r: update_result(r, loss_values=[], step_times=[], learning_rates=[]), "no loss values recorded"),
    ],
    ids=["throughput", "mfu", "nan-loss", "loss-rising", "negative-loss", "no-loss"],
)
def test_sanity_checks_catch_broken_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate,
                                            expected: str) -> None:
    path = make_result(tmp_path / "out", "nvd", "mega", mutate=mutate)
    code, stdout, _ = run_validate(capsys, str(path))
    assert code == 1
    assert expected in stdout
    assert "overall: INVALID" in stdout


def test_too_few_measured_steps_and_failed_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    short = make_result(out, "amd", "mega", TRAIN_ITERS="6", WARMUP_STEPS="2", MEASURE_SKIP_STEPS="3")
    failed = make_result(out, "nvd", "mega", status="failed")
    code, stdout, _ = run_validate(capsys, str(short), str(failed), "--min-steps", "5")
    assert code == 1
    assert "only 3 measured steps (need at least 5)" in stdout
    assert "status failed: run failed in a test" in stdout


def test_truncated_file_is_reported_not_crashing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    good = make_result(out, "amd", "prim")
    broken = out / "train_nvd_nemo_llama.json"
    broken.write_text(good.read_text()[:500], encoding="utf-8")
    code, stdout, _ = run_validate(capsys, str(out))
    assert code == 1
    assert any(line.startswith("train_nvd_nemo_llama.json") and "INVALID" in line for line in stdout.splitlines())
    assert "not valid JSON (truncated?)" in stdout


def test_empty_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run_validate(capsys, str(tmp_path))
    assert code == 2
    assert "no train_*.json result files" in stderr


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"SL": "4096"}, "SL"),
        ({"GA": "4"}, "GBS"),
        ({"FP8": "true"}, "FP8"),
        ({"tokenizer_vocab": "v2"}, "tokenizer hash"),
        ({"data_content": b"other tokens"}, "data hash"),
    ],
    ids=["seq-len", "global-batch", "precision", "tokenizer", "data"],
)
def test_fairness_lists_each_difference(tmp_path: Path, overrides: dict, key: str) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim")
    make_result(out, "nvd", "nemo", **overrides)
    report = check_fairness(load_directory(out).results)
    assert not report.fair
    keys = {d.key for d in report.differences}
    assert key in keys
    difference = next(d for d in report.differences if d.key == key)
    assert set(difference.values) == {"amd_prim_llama", "nvd_nemo_llama"}
    assert f"[llama] {key} differs" in difference.describe()


def test_fairness_missing_fingerprint_is_unverifiable_and_models_are_separate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim")
    make_result(out, "nvd", "nemo", mutate=lambda r: setattr(r, "fingerprint", None))
    make_result(out, "nvd", "nemo", "qwen", SL="4096")  # another model: never compared with llama
    make_result(out, "nvd", "mega", status="failed", SL="1024")  # failed runs do not take part
    report = check_fairness(load_directory(out).results)
    assert {d.model for d in report.differences} == {"llama"}
    unverifiable = {d.key for d in report.differences if d.unverifiable}
    assert {"data hash", "tokenizer hash", "flop_convention"} <= unverifiable
    assert "SL" not in {d.key for d in report.differences}
    assert report.compared["qwen"] == ["nvd_nemo_qwen"]


def forget_seed(result: Result) -> None:
    """What a producer that could not know SEED records: null, with the reason in ``workload.unknown``."""
    workload = result.training_config.workload
    result.training_config.workload = Workload(**{**workload.model_dump(), "SEED": None,
                                                  "unknown": {"SEED": "the log never states it"}})


def test_unknown_values_are_never_equal(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim", mutate=forget_seed)
    make_result(out, "nvd", "nemo", mutate=forget_seed)  # null on both sides: still not a match
    make_result(out, "nvd", "mega", mutate=lambda r: setattr(r.training_config, "precision_effective", None))
    report = check_fairness(load_directory(out).results)
    by_key = {d.key: d for d in report.differences}
    assert set(by_key) == {"SEED", "precision_effective"}
    seed = by_key["SEED"]
    assert seed.unverifiable
    assert seed.values == {"amd_prim_llama": "unknown (the log never states it)",
                           "nvd_nemo_llama": "unknown (the log never states it)", "nvd_mega_llama": 42}
    assert "[llama] SEED cannot verify: amd_prim_llama=unknown (the log never states it)" in seed.describe()
    precision = by_key["precision_effective"]
    assert precision.unverifiable and precision.values["nvd_mega_llama"].startswith("unknown (")
    assert precision.values["amd_prim_llama"] == "bf16"


def test_profiles_are_checked_apart_and_model_shape_differences_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim")
    make_result(out, "nvd", "nemo", mutate=lambda r: setattr(r, "profile", "tuned"))  # tuned, but no recipe
    make_result(out, "nvd", "mega", mutate=lambda r: setattr(r.model_shape, "vocab_size", 32000))
    report = check_fairness(load_directory(out).results)
    by_key = {d.key: d for d in report.differences}
    assert set(by_key) == {"recipe", "model_shape"}  # never an identical-vs-tuned "profile" difference
    assert by_key["recipe"].values == {"nvd_nemo_llama": "records no vendor recipe (profile_settings.recipe)"}
    assert by_key["recipe"].unverifiable and by_key["recipe"].profile == "tuned"
    assert by_key["model_shape"].describe() == ("[llama] model_shape differs: amd_prim_llama=vocab_size=128256, "
                                                "nvd_mega_llama=vocab_size=32000")
    json.dumps(report.as_dict())  # --json can print every difference


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        validate_main(["--help"])
    assert info.value.code == 0
    assert "--min-steps" in capsys.readouterr().out


def test_mfu_is_finite_in_handmade_results(tmp_path: Path) -> None:
    """The hand-made results are realistic: MFU below 100% and throughput from the formula."""
    path = make_result(tmp_path / "out", "nvd", "nemo", step_time=2.0)
    data = json.loads(path.read_text())
    perf = data["performance_metrics"]
    assert perf["tokens_per_second"] == pytest.approx(64 * 2048 / perf["median_step_time_seconds"])
    assert 0 < perf["mfu"]["causal"] < perf["mfu"]["full"] < 1
    assert math.isfinite(data["power_metrics"]["tokens_per_kwh"])
