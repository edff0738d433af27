"""compare, the page and the history on imported runs (issue 48 item 3): the sample's AMD-against-NVIDIA answer."""

from __future__ import annotations

import json
import shutil

import pytest

from evaluate.analysis.comparison import build_comparison
from evaluate.analysis.published import views
from evaluate.compare import main as compare_main
from evaluate.history.ingest import add_paths
from evaluate.history.store import open_database
from evaluate.render.mlperf import published_tables, title
from tests.helpers.mlperf import FULL, mlperf_result
from tests.helpers.proc import main_in_process


@pytest.fixture(scope="module")
def view(imported):
    comparison = build_comparison(imported, False, {"amd": 2.0, "nvd": 3.0})
    assert comparison is not None and not comparison.by_model  # published runs are no tprimat group
    (only,) = comparison.published
    return only


def test_the_ratio_at_eight_gpus_and_its_factors(view):
    (pair,) = view.pairs()  # the sample has AMD and NVIDIA at 8 GPUs only
    assert pair.gpus == 8 and pair.amd.label == "AMD MI355X_EPYC_9575F_pytorch"
    assert pair.nvd.label == "Supermicro AS-4126GS-NBR-LCC"  # the faster of the two B200 systems at 8 GPUs
    assert pair.time.low < pair.time.value < pair.time.high and pair.time.value > 1  # AMD slower here
    product = pair.samples.value * pair.rate.value  # time = samples / rate, ratio by ratio
    assert abs(product - pair.time.value) / pair.time.value < 0.03


def test_the_recipes_are_judged_by_mlperfs_rules(view):
    rows = {row[0]: row for row in view.pairs()[0].fairness(view.benchmark, view.ruleset)}
    assert rows["GBS"][1:3] == ["32", "16"] and rows["GBS"][3].startswith("differ: allowed")
    assert "GBS 16: point" in rows["GBS"][3] and "GBS 32: point" in rows["GBS"][3]
    assert rows["LR"][1:4] == ["0.0008", "0.0004", "differ: allowed"]
    assert rows["warm-up (samples)"][1:3] == ["4096", "256"]  # 128 steps x 32 against 16 steps x 16
    assert "NOT allowed" not in rows["end LR"][3] and rows["seeds"][1] == "10 distinct of 10"
    assert rows["precision"][1] == "notes: FP8 Training"


def test_spread_scaling_and_cost(view):
    spread = {row[0]: row for row in view.spread()}
    assert spread["NVIDIA Blackwell GPU (B200-SXM-180GB)"][3] == "86.74 .. 93.69"  # the summarizer's scores
    scaling = view.scaling()
    assert [row[2] for row in scaling] == ["8", "16", "32", "64", "128", "256"] and scaling[0][5] == "100%"
    assert all(int(row[5].rstrip("%")) < 100 for row in scaling[1:])
    amd = next(s for s in view.systems if s.label == "AMD MI355X_EPYC_9575F_pytorch")
    assert view.cost(amd) == f"${amd.time.value / 60 * 8 * 2.0:,.0f}"


def test_a_users_own_mlperf_run_sits_in_the_same_table_marked_as_theirs(imported, tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(imported, folder)
    mlperf_result(folder, [3.6, 3.25], platform="nvd", framework="mega", **FULL)
    comparison = build_comparison(folder, False, {})
    assert list(comparison.by_model) == ["llama"]  # the user's run is compared as tprimat's, apart
    (view,) = comparison.published
    rows = dict((name, rows) for name, _, rows in published_tables(view))["Every system"]
    assert [row[4] for row in rows if row[0] == "yours: nvd/mega"] == ["tprimat run (yours)"]


def test_compare_shows_the_section_and_other_benchmarks_stay_apart(imported, tmp_path, capsys):
    done = main_in_process(compare_main, capsys, "--results-dir", str(imported), "--output-dir", str(tmp_path))
    assert done.returncode == 0 and "AMD vs NVIDIA: MLPerf Training v5.1, Llama 3.1 8B (published runs" in done.stdout
    text = (tmp_path / "compare.md").read_text()
    assert "## AMD vs NVIDIA: MLPerf Training v5.1, Llama 3.1 8B (published runs, imported)" in text
    assert "### Time to train, AMD / NVIDIA at equal GPU count" in text and "### Scaling" in text
    loaded = build_comparison(imported, False, {})
    runs = [r for view in loaded.published for s in view.systems for r in s.runs]
    for run in runs:  # AMD's runs said to be another benchmark's: never paired with the B200s of llama31_8b
        if run.platform == "amd":
            run.result.published.benchmark = "llama31_405b"
    apart = views(runs, [], {})
    assert [v.benchmark for v in apart] == ["llama31_405b", "llama31_8b"] and not any(v.pairs() for v in apart)
    assert title(apart[0]).startswith("AMD vs NVIDIA: MLPerf Training v5.1, llama31_405b")


def test_history_keeps_the_round(imported, tmp_path):
    db = open_database(f"sqlite:///{tmp_path / 'history.db'}", create=True)
    added, refused = add_paths(db, [imported], ["mlperf-v5.1"])
    assert added.added == 90 and not refused
    with db.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT versions, details FROM runs JOIN series ON series.run_id = runs.id").all()
    assert all(json.loads(v)["mlperf.round"] == "5.1" for v, _ in rows)
    assert {json.loads(d)["published.submitter"] for _, d in rows} == {"AMD", "Supermicro", "University-of-Florida"}
