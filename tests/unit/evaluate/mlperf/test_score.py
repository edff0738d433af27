"""tprimat's score of a system is mlperf-logging's: its summarizer's printed score, its arithmetic, its RCP check."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from mlperf_logging.rcp_checker import rcp_checker
from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average, _query_run_start_stop

from evaluate.mlperf.cli import main
from evaluate.mlperf.reader import read_log
from evaluate.mlperf.run import run_facts, start_stop
from evaluate.mlperf.score import olympic_mean, rcp_verdict
from tests.helpers.mlperf import SAMPLE_SYSTEMS, SUMMARIZER, imported_scores, summarizer_scores

TOLERANCE = 1e-9  # relative (issue 48)


def assert_equal(theirs: dict, ours: dict) -> None:
    assert set(theirs) == set(ours)
    for key, value in theirs.items():
        assert abs(ours[key] - value) <= TOLERANCE * value, key


def test_the_sample_scores_are_the_summarizers(imported):
    """Every system of the sample: the score the summarizer printed for it (tests/fixtures/mlperf/README.md has the
    command), to 1e-9 relative: the olympic mean, times the review's scaling.json where one is published."""
    theirs = summarizer_scores(SUMMARIZER)
    assert set(theirs) == set(SAMPLE_SYSTEMS)
    assert_equal(theirs, imported_scores(imported))


def test_the_olympic_mean_is_the_summarizers():
    rng = random.Random(48)
    for _ in range(500):
        scores = [rng.uniform(5, 130) for _ in range(rng.randint(0, 12))]
        for dropped in (0, 1, 2):
            for most in (1, 4):
                theirs = _compute_olympic_average(list(scores), dropped, most)
                assert olympic_mean(list(scores), dropped, most) == theirs


def test_start_and_stop_are_the_summarizers(parsed):
    for path, (lines, _) in parsed.items():
        assert start_stop(read_log(path.read_bytes()).events) == _query_run_start_stop(lines)


def test_the_rcp_verdict_is_the_rcp_checkers(sample_tree, tmp_path):
    """check_directory (pruned RCPs, as the summarizer runs it) on each system's folder, against the verdict on the
    samples this importer read: a normalising point (AMD, GBS 32), none needed (Supermicro MI355X), GBS 128."""
    for submitter, system in (("AMD", "MI355X_EPYC_9575F_pytorch"), ("Supermicro", "8xMI355X_2xEPYC_9575F"),
                              ("University-of-Florida", "hpg.dgxb200x8.n32")):
        folder = sample_tree / submitter / "results" / system / "llama31_8b"
        facts = [run_facts(read_log(p.read_bytes())) for p in sorted(folder.glob("result_*.txt"))]
        passed, message, factor = rcp_checker.check_directory(str(folder), "training", "5.1.0", False, False,
                                                              rcp_pass="pruned_rcps")
        ours = rcp_verdict("llama31_8b", "5.1.0", facts[0].count("global_batch_size"),
                           [f.converged_samples for f in facts])
        assert ours.startswith(f"{'Pass' if passed else 'Fail'}: {message}")
        assert (f"normalises by {float(factor):.6g}" in ours) == (passed and factor > 1)


@pytest.mark.skipif(not os.environ.get("TPRIMAT_MLPERF_TREE"), reason="TPRIMAT_MLPERF_TREE names no results tree")
def test_a_whole_round_scores_as_the_summarizer(tmp_path):
    """TPRIMAT_MLPERF_TREE: a results tree (a clone); TPRIMAT_MLPERF_SUMMARY: the summarizer's detailed CSV of it
    (``python -m bench.mlperf equality`` measures the same for docs/PERFORMANCE.md)."""
    tree = Path(os.environ["TPRIMAT_MLPERF_TREE"])
    assert main(["import", str(tree), "--round", "5.1", "--output-dir", str(tmp_path)]) == 0
    assert_equal(summarizer_scores(Path(os.environ["TPRIMAT_MLPERF_SUMMARY"])), imported_scores(tmp_path))


def test_a_system_folder_alone_scores_the_same(sample_tree, tmp_path):
    """One system's folder given: its description and scaling.json are found up from it."""
    folder = sample_tree / "AMD" / "results" / "MI355X_EPYC_9575F_pytorch"
    assert main(["import", str(folder), "--round", "5.1", "--output-dir", str(tmp_path)]) == 0
    theirs = {k: v for k, v in summarizer_scores(SUMMARIZER).items() if k[0] == "AMD"}
    assert_equal(theirs, imported_scores(tmp_path))
    copy = tmp_path / "copy" / "AMD"
    shutil.copytree(sample_tree / "AMD", copy)
    (copy / "results" / "MI355X_EPYC_9575F_pytorch" / "llama31_8b" / "scaling.json").unlink()
    assert main(["import", str(copy), "--round", "5.1", "--output-dir", str(tmp_path / "unscaled")]) == 0
    unscaled = imported_scores(tmp_path / "unscaled")[("AMD", "MI355X_EPYC_9575F_pytorch")]
    assert abs(unscaled * 1.004011735824202 - theirs[("AMD", "MI355X_EPYC_9575F_pytorch")]) < 1e-9 * unscaled
