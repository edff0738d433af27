"""Time to quality in compare and validate (issue 34): the table, the ratio, the runs not averaged in, the plot."""

from __future__ import annotations

from pathlib import Path

from evaluate.analysis.comparison import build_comparison
from evaluate.analysis.summary import quality_ratios
from evaluate.analysis.validation import check_result
from evaluate.render.console import console
from evaluate.render.outputs import write_outputs
from evaluate.render.rows import quality_rows
from tests.helpers.evaluate import make_result, workload_config
from train.logs.quality import HELD_OUT
from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation
from utils.result.file import read_result
from utils.schema.model import Result

# every 5 steps (GBS 64), 64 held-out sequences, target 4.0; the fixture's workload runs 30 steps
EVAL = {"EVAL_INTERVAL": "320", "EVAL_SAMPLES": "64", "TARGET_LOSS": "4.0"}


def with_quality(losses: list[float], seconds_per_step: float):
    """A ``mutate`` that puts evaluations every 5 steps with ``losses`` into a result."""
    cfg = workload_config(**EVAL)

    def mutate(result: Result) -> None:
        evaluations = [make_evaluation(cfg, step=5 * (i + 1), loss=loss, seconds=5 * (i + 1) * seconds_per_step,
                                       eval_seconds=0.5, unix_s=1000.0 + 5 * (i + 1) * seconds_per_step)
                       for i, loss in enumerate(losses)]
        result.quality = build_quality(cfg, evaluations, reduction=PER_TOKEN_MEAN, platform=result.platform,
                                       held_out=HELD_OUT.get(result.framework, FIXED_SET),
                                       gpus=8, run_start_unix=1000.0,
                                       energy=lambda start, end: ((end - start) * 5.6 / 3600, None))
    return mutate


def test_the_time_to_quality_table_ratio_plot_and_misses(tmp_path: Path) -> None:
    out = tmp_path / "results"
    for k in (1, 2):
        make_result(out, "nvd", "mega", run_index=k, seed=k, mutate=with_quality([6.0, 4.5, 3.9, 3.5], 1.5 + k / 10))
        make_result(out, "amd", "prim", run_index=k, seed=k, mutate=with_quality([6.0, 3.95, 3.7], 1.8 + k / 10))
    missed = make_result(out, "amd", "prim", run_index=3, seed=3, mutate=with_quality([6.0, 5.0, 4.5], 1.8))
    comparison = build_comparison(out, allow_mismatch=True, prices={"amd": 2.0, "nvd": 3.0})
    assert comparison is not None
    written = {path.name for path in write_outputs(comparison, tmp_path / "report")}
    assert {"quality.png", "compare.md"} <= written
    text = (tmp_path / "report" / "compare.md").read_text()
    assert "### Time to quality" in text and "![eval loss against time and tokens](quality.png)" in text
    assert "2 of 3" in text and "2 of 2" in text  # the miss is counted, not averaged in
    assert missed.name in text and "target 4 not reached in 3 evaluation(s)" in text
    assert "AMD / NVIDIA time to target" in text
    summaries = {q.group.platform: q for q in comparison.quality("llama")}
    assert summaries["amd"].time_s.value == 10 * 1.95 and summaries["nvd"].time_s.value == 15 * 1.65
    assert summaries["nvd"].cost(3.0).value == summaries["nvd"].gpu_hours.value * 3.0
    assert "time to quality:" in console(comparison)
    result = read_result(missed)
    assert not check_result(result, missed).errors
    assert any("was not reached" in w for w in check_result(result, missed).warnings)


def test_a_fixed_set_is_never_set_against_continuing_blocks(tmp_path: Path) -> None:
    """Issue 50: nemo scores MLPerf's fixed held-out set, mega reads the next block each time: no ratio between them,
    and the mega row says it is not MLPerf's measure; two continuing-block stacks still pair with each other."""
    out = tmp_path / "results"
    make_result(out, "nvd", "nemo", mutate=with_quality([6.0, 4.5, 3.9], 1.5))
    make_result(out, "amd", "mega", mutate=with_quality([6.0, 3.95], 1.8))
    make_result(out, "nvd", "mega", mutate=with_quality([6.0, 3.9], 1.6))
    comparison = build_comparison(out, allow_mismatch=True, prices={})
    assert comparison is not None
    summaries = {(q.group.platform, q.group.framework): q for q in comparison.quality("llama")}
    assert summaries["nvd", "nemo"].fixed_set is True and summaries["amd", "mega"].fixed_set is False
    ratios = quality_ratios(list(summaries.values()))
    assert [(r.numerator.group.framework, r.denominator.group.framework) for r in ratios] == [("mega", "mega")]
    names = [row[0] for row in quality_rows(list(summaries.values()), {})]
    assert sum(name.endswith("(not MLPerf's measure)") for name in names) == 2, names


def test_validate_refuses_evaluations_the_run_cannot_have(tmp_path: Path) -> None:
    def off_interval(result: Result) -> None:
        with_quality([6.0, 3.9], 1.5)(result)
        bad = result.quality.model_dump()
        bad["evaluations"][0]["step"] = 4  # not a multiple of the 5-step interval, and its samples not 4 x GBS
        result.quality = type(result.quality).model_validate(bad)

    path = make_result(tmp_path, "nvd", "mega", mutate=off_interval)
    errors = check_result(read_result(path), path).errors
    assert any("not a multiple of the interval" in e for e in errors)
    assert any("samples, but step x GBS" in e for e in errors)
