"""Issue 33, family 5: every signal a user sends is handled.

SIGHUP (a closed terminal) to shell/train.sh stops the job's whole tree like SIGTERM and records it; a signal
to an evaluate entry point, during its start-up imports or after, is one line and 128 + n, never a traceback.
Stand-in job scripts in a throwaway copy (as tests/e2e/test_untrusted_signals.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.evaluate import make_result
from tests.helpers.paths import REPO
from tests.helpers.proc import ignored_signals, signals_at_default, wait_for
from tests.helpers.shell import clean_env, script_env
from utils.result.file import read_result

JOB = {"PLATFORM": "cpu", "FRAMEWORK": "tran", "MODELS": "llama", "TP": "1", "PP": "1", "CP": "1", "DP": "1",
       "GA": "1", "GPUS_PER_NODE": "1", "MASTER_ADDR": "127.0.0.1"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in ("Z", "X")


def test_sighup_to_train_sh_stops_the_job_tree_and_records_it(repo: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    worker = (f"{sys.executable} -c 'import os, time; "
              f"open(\"{pid_file}\", \"w\").write(str(os.getpid())); time.sleep(120)'")
    (repo / "train" / "train_cpu_tran_llama.sh").write_text(f"#!/usr/bin/env bash\n{worker}\n")
    env = script_env(tmp_path, **JOB)
    with (tmp_path / "train.log").open("w") as sink, signals_at_default(signal.SIGHUP):
        proc = subprocess.Popen(["bash", str(repo / "shell" / "train.sh")], env=env, cwd=repo, stdout=sink,
                                stderr=subprocess.STDOUT)
    try:
        assert signal.SIGHUP not in ignored_signals(proc.pid), "train.sh would start with SIGHUP ignored"
        wait_for(lambda: (pid_file.exists() and pid_file.read_text().strip()) or proc.poll() is not None, 120,
                 "the worker to start")
        worker_pid = int(pid_file.read_text())
        proc.send_signal(signal.SIGHUP)  # to train.sh only, as a closed terminal does
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = (tmp_path / "train.log").read_text()
    assert code == 129, text
    wait_for(lambda: not _alive(worker_pid), 10, "the worker to stop")
    result = read_result(Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json")
    assert result.status == "incomplete" and "SIGHUP" in result.error, (result.error, text)


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize(("module", "signum"), [("evaluate.compare", signal.SIGINT),
                                                ("evaluate.validate", signal.SIGINT),
                                                ("evaluate.compare", signal.SIGHUP)])
@pytest.mark.parametrize("moment", ["during start-up", "while working"])
def test_an_evaluate_entry_point_answers_a_signal_in_one_line(tmp_path: Path, module: str, signum: int,
                                                              moment: str) -> None:
    out = tmp_path / "out"
    for k in range(3 if moment == "while working" else 1):
        make_result(out, "nvd", "tran", run_index=k + 1, seed=k)
    args = ["--results-dir", str(out)] if module == "evaluate.compare" else [str(out)]
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=clean_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The project's first import installs the answer (SIGTERM caught: Python alone does not catch it); a signal
    # before that meets the bare interpreter, which no project code can answer.
    wait_for(lambda: _catches_sigterm(proc.pid) or proc.poll() is not None, 60, "the first project import")
    time.sleep(0.0 if moment == "during start-up" else 2.0)
    if proc.poll() is not None:
        proc.communicate()
        pytest.skip("the command finished before the signal was sent")  # a fast machine: nothing to answer
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    if proc.returncode in (0, 1):
        pytest.skip("the command finished before the signal arrived")  # its own verdict: nothing to answer
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].endswith(f"stopped by {signal.Signals(signum).name}")
