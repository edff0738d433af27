"""A signal at any moment leaves a result; a job's leftovers never reach the next job (issue 26, shell side).

Real processes of shell/train.sh in a throwaway copy of the repository whose job scripts are small stand-ins
(the launcher's own signal handling is tests/e2e/test_job_tree_signals.py's): what is checked here is train.sh's part.
The copies of the tests whose train.sh ends unsignalled have no comparison (tests/helpers/shell.py
``without_comparison``): it runs after the jobs, and none of them reads it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import command_line, descendants, wait_for
from tests.helpers.shell import script_env, without_comparison
from utils.files.run_owner import STARTED_REASON
from utils.machine.rendezvous import port_problem
from utils.result.file import read_result, update_result, write_result
from utils.result.run_claim import CLOSED_PREFIX, RUN_ID_ENV, claim, write_problem

# One tiny tran job on this machine (tests/helpers/shell.py script_env adds the folders and a free port).
JOB = {"PLATFORM": "cpu", "FRAMEWORK": "tran", "MODELS": "llama", "TP": "1", "PP": "1", "CP": "1", "DP": "1",
       "GA": "1", "GPUS_PER_NODE": "1", "MASTER_ADDR": "127.0.0.1"}


def _job(repo: Path, model: str, body: str) -> None:
    (repo / "train" / f"train_cpu_tran_{model}.sh").write_text(f"#!/usr/bin/env bash\n{body}\n")


def _start(repo: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as sink:
        return subprocess.Popen(["bash", str(repo / "shell" / "train.sh")], env=env, cwd=repo, stdout=sink,
                                stderr=subprocess.STDOUT)


@pytest.mark.parametrize("moment", ["before the job", "while the launcher starts"])
def test_sigterm_at_any_moment_leaves_an_incomplete_result(repo: Path, tmp_path: Path, moment: str) -> None:
    started = tmp_path / "job-started"
    _job(repo, "llama", f"touch {started}\nsleep 60")  # a launcher that has not recorded anything yet
    env = script_env(tmp_path, **JOB)
    log = tmp_path / "train.log"
    proc = _start(repo, env, log)
    try:
        if moment == "before the job":  # train.sh is asking Python for the platform, the config and the jobs
            # (a fixed 0.3 s pause let the signal land before bash had set its traps on a loaded machine)
            wait_for(lambda: any("python" in command_line(p) for p in descendants(proc.pid)) or proc.poll() is not None,
                     60, "train.sh's first Python")
        else:
            wait_for(lambda: started.exists() or proc.poll() is not None, 120, "the job to start")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert code == 143, text
    result = read_result(tmp_path / "out" / "train_cpu_tran_llama.json")
    assert result.status == "incomplete", text
    assert result.error.startswith("interrupted by SIGTERM before its launcher recorded anything"), result.error


def test_the_placeholder_is_written_before_the_launcher_runs(repo: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    _job(without_comparison(repo), "llama", f'{sys.executable} -m utils.result.file status '
                        f'"$OUTPUT_DIR/train_cpu_tran_llama.json" > {seen}; '
                        f'echo "$TPRIMAT_RUN_ID" >> {seen}')
    proc = subprocess.run(["bash", str(repo / "shell" / "train.sh")], env=script_env(tmp_path, **JOB), cwd=repo,
                          capture_output=True, text=True, timeout=300)
    status, run_id = seen.read_text().split()
    assert status == "incomplete" and len(run_id) >= 16, proc.stdout + proc.stderr
    result = read_result(tmp_path / "out" / "train_cpu_tran_llama.json")
    assert result.error.startswith(STARTED_REASON), "nothing replaced it: the stand-in job wrote no result"
    owner = (tmp_path / "out" / ".tprimat" / "train_cpu_tran_llama.json.run").read_text().strip()
    assert owner == CLOSED_PREFIX + run_id, "the run is closed after the job"


def test_leftovers_of_a_job_are_stopped_and_the_port_is_free_for_the_next(repo: Path, tmp_path: Path) -> None:
    """The first job leaves an orphan in its own session holding MASTER_PORT (as torchrun did after a SIGKILL)."""
    env = script_env(tmp_path, **{**JOB, "MODELS": "llama qwen"})
    without_comparison(repo)
    port = int(env["MASTER_PORT"])
    holder = (f"import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
              f"s.bind(('0.0.0.0', {port})); s.listen(); time.sleep(300)")
    _job(repo, "llama", f'setsid {sys.executable} -c "{holder}" </dev/null >/dev/null 2>&1 &\nsleep 1\nexit 1')
    second = tmp_path / "second.txt"
    _job(repo, "qwen", f'{sys.executable} -c "import sys; sys.path.insert(0, \'{repo}\'); '
                       f'from utils.machine.rendezvous import port_problem; print(port_problem({port}))" > {second}')
    proc = subprocess.run(["bash", str(repo / "shell" / "train.sh")], env=env, cwd=repo, capture_output=True,
                          text=True, timeout=300)
    assert "stopped 1 process(es) the job left behind" in proc.stderr, proc.stdout + proc.stderr
    assert second.read_text().strip() == "None", "the port was free when the second job started"
    assert port_problem(port) is None


def test_a_write_from_a_run_that_no_longer_owns_the_result_is_dropped(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers.evaluate import make_result

    path = make_result(tmp_path / "out", "amd", "prim")
    before = path.read_bytes()
    claim(path, "new-run")
    monkeypatch.setenv(RUN_ID_ENV, "old-run")
    assert "was replaced by a newer run" in write_problem(path)
    result = update_result(read_result(path), status="failed", error="an orphan's late verdict")
    write_result(path, result)
    assert path.read_bytes() == before and "is dropped" in capsys.readouterr().err
    claim(path, CLOSED_PREFIX + "old-run")
    assert "has ended" in write_problem(path)
    monkeypatch.delenv(RUN_ID_ENV)
    assert write_problem(path) is None, "a process outside any run writes as before"
    assert os.path.exists(path)


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_job_dies_with_a_killed_launcher(tmp_path: Path) -> None:
    """SIGKILL of the launcher (no handler runs): the job in its own session gets SIGTERM from the kernel."""
    pid_file = tmp_path / "job.pid"
    job = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    launcher = ("import os, sys\nfrom pathlib import Path\nfrom train.launch.job_guard import Signals, run_logged\n"
                f"with Signals() as s:\n    run_logged([sys.executable, '-c', {job!r}], dict(os.environ), None, "
                f"Path({str(tmp_path / 'job.log')!r}), s)\n")
    proc = subprocess.Popen([sys.executable, "-c", launcher], cwd=REPO)
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the job to start")
        job_pid = int(pid_file.read_text())
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

        def gone() -> bool:
            try:
                os.kill(job_pid, 0)
            except ProcessLookupError:
                return True
            return Path(f"/proc/{job_pid}/stat").read_text().split()[2] == "Z"

        wait_for(gone, 30, "the job to die with its launcher")
    finally:
        if proc.poll() is None:
            proc.kill()
