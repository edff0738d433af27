"""bench/eval_overhead.py: the share arithmetic, and the quick cpu mode runs end to end."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.eval_overhead import MLPERF_EVAL, MLPERF_INTERVAL, main, share
from tests.helpers.proc import run_module


def test_the_share_at_mlperfs_cadence() -> None:
    # an evaluation batch at a third of a step (forward only): 1024 / (12288 x 3 + 1024) = 2.7% of the run
    assert share(3.0, 1.0, MLPERF_INTERVAL, MLPERF_EVAL, 8) == pytest.approx(1024 / (12288 * 3 + 1024))
    assert share(1.0, 1.0, 8, 8, 8) == pytest.approx(0.5)


@pytest.mark.slow
def test_quick_mode_reports_its_figures(tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    out = tmp_path / "eval_overhead.json"
    proc = run_module("bench.eval_overhead", "--quick", "--model", "llama", "--json", str(out),
                      env=tiny_env(EVAL_INTERVAL="16", EVAL_SAMPLES="8"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["median_step_s"] > 0 and figures["median_eval_batch_s"] > 0
    assert 0 < figures["mlperf_cadence_percent"] < 100 and 0 < figures["config_cadence_percent"] < 100
    assert "MLPerf's cadence" in proc.stdout


def test_bad_arguments_exit_2() -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--pairs", "0"])
    assert caught.value.code == 2
