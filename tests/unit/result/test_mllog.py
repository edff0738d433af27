"""utils/result/mllog.py: a PROFILE=mlperf result's MLLOG, judged by MLPerf's own compliance checker (issue 35).

The results are made by the tree's own builders (``tests/helpers/evaluate.py``: ``new_result``,
the metrics producers, ``utils/measure/quality.py``'s ``build_quality``), as a run leaves them,
and the MLLOG goes through the pinned mlperf-logging's real checker. A tiny run (SL 128, loss far
above 3.3) must draw exactly the checker's two complaints about such a run and nothing else, so
every other rule is met; a run at SL 8192 that reaches 3.3 must pass.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.evaluate import make_result
from tests.helpers.mlperf import FULL, TINY, mlperf_result
from utils.result.file import read_result
from utils.result.mllog import RULESET_OF_RECORD, mllog_path, mlperf_record

SEQUENCE_LENGTH = "CHECK for 'max_sequence_length' failed"
NOT_REACHED = "Failed checks for eval_accuracy : (v['value'] <= 3.3) and v['value'] > 0.0"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = mlperf_result(tmp_path_factory.mktemp("tiny"), [10.4, 9.87], **TINY)
    return mlperf_record(read_result(path), mllog_path(path)), path


def test_a_tiny_run_breaks_exactly_the_two_rules_a_tiny_run_must_break(tiny):
    block, path = tiny
    assert block.checker == "mlperf-logging 4.1.68" and block.ruleset_of_record == RULESET_OF_RECORD == "6.0.0"
    assert block.verdict == "FAILED" and [c.ruleset for c in block.checks] == ["6.0.0", "6.1.0"]
    for check in block.checks:
        assert check.verdict == "FAILED" and len(check.messages) == 2, check.messages
        length, target = check.messages
        assert length.startswith(SEQUENCE_LENGTH) and "v['value'] == 8192" in length and '"value": 128' in length
        assert target == NOT_REACHED
    assert block.mllog == path.with_suffix(".mllog").name and mllog_path(path).is_file()


def test_the_mllog_is_mllog_lines_of_the_run(tiny):
    block, path = tiny
    lines = [json.loads(line.split(":::MLLOG ", 1)[1]) for line in mllog_path(path).read_text().splitlines()]
    keys = [line["key"] for line in lines]
    assert keys[:3] == ["cache_clear", "init_start", "submission_benchmark"]
    assert keys[-2:] == ["run_stop", "train_samples"]
    assert keys.index("submission_division") < keys.index("init_stop") < keys.index("run_start")
    assert keys.index("opt_learning_rate_warmup_steps") < keys.index("opt_learning_rate_decay_steps")
    value = {line["key"]: line["value"] for line in lines if line["event_type"] == "POINT_IN_TIME"}
    assert value["cache_clear"] is False  # tprimat drops no caches
    assert (value["max_steps"], value["opt_learning_rate_decay_steps"]) == (1_200_000, 1_200_000 - 128)
    assert (value["opt_adamw_epsilon"], value["eval_samples"], value["global_batch_size"]) == (1e-5, 1024, 8)
    accuracy = [line for line in lines if line["key"] == "eval_accuracy"]
    assert [(a["value"], a["metadata"]["samples_count"]) for a in accuracy] == [(10.4, 16), (9.87, 32)]
    stop = next(line for line in lines if line["key"] == "run_stop")
    assert stop["metadata"]["status"] == "aborted" and stop["time_ms"] >= accuracy[-1]["time_ms"]
    init, run_start = (next(line for line in lines if line["key"] == key) for key in ("init_start", "run_start"))
    assert run_start["time_ms"] - init["time_ms"] == 60_000 and accuracy[0]["time_ms"] == run_start["time_ms"] + 3000
    assert all(k.startswith("tprimat_") for k in keys if k.startswith("tprimat"))  # tprimat's own keys apart
    # issue 50: the metadata says whether the evaluations scored MLPerf's fixed held-out set (mega: it did not)
    assert value["tprimat_eval_measure"].startswith("not MLPerf's measure: evaluation k reads the k-th block")
    assert block.rcp.kind == "none" and "no RCP at GBS 8" in block.rcp.note


def test_a_run_at_the_rules_that_reaches_the_target_passes(tmp_path):
    path = mlperf_result(tmp_path, [4.1, 3.29], **FULL)
    block = mlperf_record(read_result(path), mllog_path(path))
    assert block.verdict == "SUCCESS", [c.messages for c in block.checks]
    assert [(c.ruleset, c.verdict, c.messages) for c in block.checks] == [("6.0.0", "SUCCESS", []),
                                                                          ("6.1.0", "SUCCESS", [])]
    assert (block.rcp.kind, block.rcp.base_lr, block.rcp.warmup_samples) == ("point", 8e-4, 4096)
    stop = next(line for line in mllog_path(path).read_text().splitlines() if '"run_stop"' in line)
    assert '"status": "success"' in stop


def test_no_quality_block_is_a_reason_not_a_verdict(tmp_path):
    path = make_result(tmp_path, "nvd", "mega", **FULL)
    block = mlperf_record(read_result(path), mllog_path(path))
    assert block.verdict is None and "no quality block" in block.reason and not mllog_path(path).exists()


def test_a_failure_to_write_the_mllog_is_the_blocks_reason(tmp_path, monkeypatch):
    """The result must still be written: an error while writing or checking the MLLOG is said in the block."""
    import utils.result.mllog as mllog

    def broken(_result, _path):
        raise OSError("disk gone")

    path = make_result(tmp_path, "nvd", "mega", **FULL)
    monkeypatch.setattr(mllog, "mlperf_record", broken)
    block = mllog.mlperf_block(read_result(path), path)
    assert block.verdict is None and block.benchmark == mllog.BENCHMARK
    assert block.reason == "writing or checking the MLLOG failed: OSError: disk gone"
