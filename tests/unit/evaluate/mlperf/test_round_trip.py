"""A tprimat PROFILE=mlperf run -> its MLLOG (utils/result/mllog.py) -> the import: the same quality block.

An MLLOG holds times in whole milliseconds, so times agree to the millisecond; it holds no energy and not the
run's own words for why it stopped, so those two reasons are the import's; everything else is equal.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluate.mlperf.cli import main
from tests.helpers.mlperf import FULL, TINY, mlperf_result
from tests.helpers.proc import run_module
from utils.result.file import read_result
from utils.result.mllog import mllog_path, mllog_text
from utils.schema.model import Result
from utils.schema.quality import Quality

TIMES = ("seconds", "unix_s", "eval_seconds", "run_start_unix", "time_to_target_s", "gpu_hours_to_target")
OWN_WORDS = ("stop_reason", "null_reasons")


def _rounded(value: object, key: str = "") -> object:
    if isinstance(value, dict):
        return {k: _rounded(v, k) for k, v in value.items() if k not in (*OWN_WORDS, *TIMES)}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return round(value, 2) if key in TIMES and isinstance(value, float) else value


def assert_same_quality(ours: Quality, theirs: Quality) -> None:
    for name in TIMES:  # to the millisecond (gpu-hours: that millisecond times the GPUs)
        a, b = getattr(ours, name, None), getattr(theirs, name, None)
        assert (a is None) == (b is None) and (a is None or abs(a - b) <= 2e-3), name
    for mine, read in zip(ours.evaluations, theirs.evaluations, strict=True):
        for name in ("seconds", "unix_s", "eval_seconds"):  # a run's unknown end: the MLLOG places it (t0 + seconds)
            assert getattr(mine, name) is None or abs(getattr(mine, name) - getattr(read, name)) <= 1e-3, name
    assert set(ours.null_reasons) == set(theirs.null_reasons)
    assert _rounded(ours.model_dump()) == _rounded(theirs.model_dump())


def _imported(mllog: Path, out: Path) -> Quality:
    assert main(["import", str(mllog), "--output-dir", str(out)]) == 0
    (path,) = out.glob("train_*.json")
    result = read_result(path)
    assert result.published is None and result.source.kind == "mlperf"  # the user's own run, read back
    assert result.quality is not None
    return result.quality


@pytest.mark.parametrize("losses, workload, reached", [([3.6, 3.4, 3.25], FULL, True), ([7.9, 7.1], TINY, False)])
def test_a_result_through_its_mllog_keeps_its_quality_block(tmp_path, losses, workload, reached):
    def stopped(result: Result) -> None:  # a run at the target ends there (STOP_AT_TARGET), as a real one does
        if result.quality is not None and result.quality.reached:
            result.quality = result.quality.model_copy(update={"stop_reason": "target", "stopped_at_target": True})

    result = read_result(mlperf_result(tmp_path / "run", losses, mutate=stopped, **workload))
    assert result.quality is not None and result.quality.reached is reached
    mllog = tmp_path / "train_nvd_mega_llama_mlperf.mllog"
    mllog.write_text(mllog_text(result))
    assert_same_quality(result.quality, _imported(mllog, tmp_path / "out"))


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("train.tran.evaluation") is None, reason="tran cannot evaluate here")
def test_a_real_cpu_run_through_its_mllog_keeps_its_quality_block(tiny_env: Callable[..., dict[str, str]],
                                                                   tmp_path) -> None:
    """tran's tiny cpu run under PROFILE=mlperf (as tests/unit/train/frameworks/test_tran_mlperf.py runs it)."""
    env = tiny_env(MODELS="llama", PROFILE="mlperf", TRAIN_ITERS="2", EVAL_INTERVAL="4", EVAL_SAMPLES="4", MBS="4",
                   GA="1")
    proc = run_module("train.launch.launcher", "--platform", "cpu", "--framework", "tran", "--model", "llama",
                      env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    path = Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama_mlperf.json"
    result = read_result(path)
    assert result.quality is not None and len(result.quality.evaluations) == 2
    assert_same_quality(result.quality, _imported(mllog_path(path), tmp_path / "out"))
