"""The launcher's early stop for Megatron-style jobs (train/launch/target_watch.py), on the stand-in Megatron.

tests/fakes/megatron_lm/pretrain_gpt.py prints iteration and evaluation lines in MEGATRON_REF's format strings and,
with ``--exit-signal-handler``, leaves after the step in which it got SIGTERM with exit code 0, as Megatron does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import FAKES
from train.launch.job_guard import Signals, run_logged
from train.launch.target_watch import TargetWatch, find_worker
from train.logs.quality import read_record, record_path
from train.logs.scan import scan_file

SCRIPT = "pretrain_gpt.py"


def run_stand_in(tmp_path: Path, *flags: str, target: float | None, stop: bool = True,
                 losses: str = "7,6,5,4,3", wait: str = "5", stop_at: int = 0) -> tuple[int, TargetWatch, Path]:
    """``stop_at``: the evaluation the stop is expected after; the stand-in waits up to ``wait`` seconds for the
    SIGTERM there, and at the others only until the watcher has recorded them (tests/fakes/megatron_lm)."""
    log = tmp_path / "job.log"
    watch = TargetWatch(record_path(log), SCRIPT, target, stop)
    argv = [sys.executable, str(FAKES / "megatron_lm" / SCRIPT), "--train-iters", "40", "--eval-iters", "1",
            "--eval-interval", "4", "--global-batch-size", "8", "--valid-data-path", "/v", *flags]
    env = {**os.environ, "TPRIMAT_FAKE_STEP_S": "0.02", "TPRIMAT_FAKE_EVAL_LOSSES": losses,
           "TPRIMAT_FAKE_SIGNAL_WAIT_S": wait}
    if stop_at:
        env.update(TPRIMAT_FAKE_SIGNAL_AT=str(stop_at), TPRIMAT_FAKE_WATCH_RECORD=str(record_path(log)))
    with Signals() as signals:
        code = run_logged(argv, env, None, log, signals, watch=watch)
    return code, watch, log


def test_stops_gracefully_after_the_first_evaluation_at_the_target(tmp_path: Path) -> None:
    code, watch, log = run_stand_in(tmp_path, "--exit-signal-handler", target=5.0, stop_at=3)
    assert code == 0 and watch.stopped is not None and "stopped at target" in watch.stopped
    scan = scan_file(log)
    assert [e.loss for e in scan.evaluations] == [7.0, 6.0, 5.0]  # at or below: 5.0 stops
    assert scan.last_iteration == 12  # the step of the evaluation at the target is the last
    assert "[exiting program after receiving SIGTERM.]" in log.read_text(encoding="utf-8")
    record = read_record(log)
    kinds = [entry["kind"] for entry in record]
    assert kinds == ["iteration", "evaluation", "evaluation", "evaluation", "stop"]
    assert record[0]["iteration"] == 1 and record[0]["step_time_s"] == pytest.approx(0.02)
    times = [entry["unix_s"] for entry in record]
    assert times == sorted(times) and record[-1]["signalled_pid"] is not None
    assert record[1]["eval_seconds"] == pytest.approx(0.02)


def test_no_stop_without_stop_at_target_and_a_record_all_the_same(tmp_path: Path) -> None:
    code, watch, log = run_stand_in(tmp_path, "--exit-signal-handler", target=5.0, stop=False, losses="7,6",
                                    wait="0")
    assert code == 0 and watch.stopped is None
    scan = scan_file(log)
    assert scan.last_iteration == 40 and [e.kind for e in scan.evaluations][-1] == "after training"
    record = read_record(log)
    assert [e["iteration"] for e in record if e["kind"] == "evaluation"] == [4 * k for k in range(1, 11)]


def test_a_nan_evaluation_stops_the_run_with_its_reason(tmp_path: Path) -> None:
    code, watch, log = run_stand_in(tmp_path, "--exit-signal-handler", target=None, losses="7,nan", stop_at=2)
    assert code == 0 and watch.stopped is not None and "not finite" in watch.stopped
    record = read_record(log)
    assert record[2]["loss"] == "nan" and record[-1]["kind"] == "stop"


def test_the_worker_is_found_below_the_agent_and_above_its_forks(tmp_path: Path) -> None:
    """torchrun's command names the script too, and a data-loader fork runs the worker's command one level down."""
    worker = tmp_path / "worker_entry.py"
    worker.write_text("import os, time\nif os.fork() == 0:\n    time.sleep(30)\nelse:\n    time.sleep(30)\n",
                      encoding="utf-8")
    agent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[2:])",
                              "torchrun", sys.executable, str(worker)])
    try:
        found = None
        for _ in range(100):
            found = find_worker(agent.pid, "worker_entry.py")
            if found is not None and len(_descendants(agent.pid)) >= 2:
                break
            time.sleep(0.05)
        assert found is not None and found != agent.pid
        assert Path(f"/proc/{found}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(agent.pid)
        assert find_worker(agent.pid, "no-such-script-anywhere.py") is None
    finally:
        for pid in _descendants(agent.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        agent.kill()
        agent.wait()


def _descendants(root: int) -> list[int]:
    from train.launch.target_watch import _children

    tree, found, level = _children(), [], [root]
    while level:
        level = [child for pid in level for child in tree.get(pid, [])]
        found += level
    return found
