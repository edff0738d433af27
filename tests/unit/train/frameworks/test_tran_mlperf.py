"""A real tiny PROFILE=mlperf run of tran on cpu (issues 34, 35 and 48): evaluation, MLLOG, the checker, compare,
and the MLLOG imported back.

tran trains the tiny Llama at SL 64 under MLPerf's optimizer, schedule, evaluation size (1,024 held-out
sequences) and target (3.3), evaluates after steps 1 and 2, and the launcher writes the MLLOG from the result and
runs mlperf-logging's checker on it. A tiny run must break exactly the sequence-length and target rules. The
import of that MLLOG (``python -m evaluate.mlperf import``) gives the result's quality block back
(tests/unit/evaluate/mlperf/test_round_trip.py makes the same trip from made results): one real run for both
checks, where each started its own (docs/PERFORMANCE.md, "The test suite").
Skipped, with the reason, where tran cannot evaluate yet (issue 34's ``train/tran/evaluation.py``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluate.compare import main as compare_main
from tests.helpers.mlperf import assert_same_quality, imported_quality
from tests.helpers.proc import run_module
from utils.result.file import read_result
from utils.result.mllog import mllog_path

EVALUATES = importlib.util.find_spec("train.tran.evaluation") is not None


@pytest.mark.slow
@pytest.mark.skipif(not EVALUATES, reason="tran has no held-out evaluation here (issue 34: train/tran/evaluation.py)")
def test_a_tiny_mlperf_run_writes_mllog_the_checker_reads(tiny_env: Callable[..., dict[str, str]], capsys,
                                                         tmp_path: Path) -> None:
    # GBS 4 as the tiny workload's, in one micro-batch of 4: the 1,024-sequence evaluation is 256 forwards, not 512
    # (5.6 s against 20.9 s at load 17 on the 2-core VM; the same losses). Two evaluations: the import reads a list.
    env = tiny_env(MODELS="llama", PROFILE="mlperf", TRAIN_ITERS="2", EVAL_INTERVAL="4", EVAL_SAMPLES="4", MBS="4",
                   GA="1")
    proc = run_module("train.launch.launcher", "--platform", "cpu", "--framework", "tran", "--model", "llama",
                      env=env, timeout=600)
    path = Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama_mlperf.json"
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(path)
    assert result.quality is not None and result.quality.eval_samples == 1024 and not result.quality.reached
    assert len(result.quality.evaluations) == 2
    assert_same_quality(result.quality, imported_quality(mllog_path(path), tmp_path / "imported"))
    block = result.mlperf
    assert block is not None and block.mllog == mllog_path(path).name and mllog_path(path).is_file()
    for check in block.checks:
        assert check.verdict == "FAILED" and len(check.messages) == 2, check.messages
        assert check.messages[0].startswith("CHECK for 'max_sequence_length' failed")
        assert check.messages[1] == "Failed checks for eval_accuracy : (v['value'] <= 3.3) and v['value'] > 0.0"
    assert compare_main(["--results-dir", env["OUTPUT_DIR"]]) == 0
    assert "MLPerf cpu/tran train_cpu_tran_llama_mlperf.json: FAILED (6.0.0)" in capsys.readouterr().out
