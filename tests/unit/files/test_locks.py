"""utils/files/locks.py: one writer per DATA_DIR and per result file; a second fails at once naming the holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.workload import tiny_environ
from utils.files.locks import Holder, LockError, LockHeld, data_lock_path, hold, result_lock_path

HOLDER = """
import sys, time
from pathlib import Path
from utils.files.locks import hold
with hold(Path(sys.argv[1]), "the test thing", command="holder-for-the-test"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def other_holder(tmp_path: Path):
    """Another process holding ``tmp_path/.tprimat/data.lock``; yields (process, lock path)."""
    lock = data_lock_path(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc, lock
    finally:
        proc.kill()
        proc.wait()


def test_a_second_writer_fails_at_once_naming_the_holder(other_holder) -> None:
    proc, lock = other_holder
    started = time.monotonic()
    with pytest.raises(LockHeld) as info, hold(lock, "DATA_DIR x"):
        pass
    assert time.monotonic() - started < 1
    message = str(info.value)
    assert f"pid {proc.pid} on {socket.gethostname()}" in message and "holder-for-the-test" in message
    assert str(lock) in message and message.startswith("DATA_DIR x is locked by")


def test_a_killed_holder_is_taken_over_with_a_note(other_holder, capsys: pytest.CaptureFixture[str]) -> None:
    proc, lock = other_holder
    proc.kill()
    proc.wait()
    assert f"pid={proc.pid}" in lock.read_text(), "a killed holder cannot empty its lock file"
    with hold(lock, "DATA_DIR x"):
        assert Holder.parse(lock.read_text()).pid == os.getpid()
    assert f"took over the lock {lock} left by pid {proc.pid}" in capsys.readouterr().err
    assert lock.read_text() == "", "a normal release leaves nothing to take over"


def test_reentrant_within_a_process_and_released_after(tmp_path: Path) -> None:
    lock = result_lock_path(tmp_path / "train_cpu_tran_llama.json")
    assert lock == tmp_path / ".tprimat" / "train_cpu_tran_llama.json.lock"
    with hold(lock, "r"), hold(lock, "r"):
        assert Holder.parse(lock.read_text()).pid == os.getpid()
    probe = subprocess.run([sys.executable, "-c", HOLDER.replace("time.sleep(60)", "pass"), str(lock)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and "held" in probe.stdout


def test_an_uncreatable_lock_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".tprimat").write_text("a file where the lock folder goes")
    with pytest.raises(LockError, match="cannot create the lock file"), hold(data_lock_path(tmp_path), "x"):
        pass


def test_a_shell_holds_the_lock_for_its_children(tmp_path: Path) -> None:
    """data.sh's way: the lock on an inherited descriptor covers its stages, and nobody else's."""
    env = tiny_environ(tmp_path / "data", tmp_path / "out")
    child = f"{sys.executable} -c 'from utils.files.locks import hold, data_lock_path; import sys; " \
            f"from pathlib import Path; ctx = hold(data_lock_path(Path(sys.argv[1])), \"d\"); ctx.__enter__(); " \
            f"print(\"child ok\")' {tmp_path / 'data'}"
    script = f"""
lock="$({sys.executable} -m utils.files.locks path data)" || exit 9
exec 9<>"$lock"
{sys.executable} -m utils.files.locks acquire data --fd 9 --holder-pid $$ --command "the shell" || exit 8
TPRIMAT_LOCK_FDS=9 {child} || exit 7
(exec 9<&-; {child}) 2>&1 && exit 6
grep -q "pid=$$" "$lock" || exit 5
{sys.executable} -m utils.files.locks release --fd 9
"""
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("child ok") == 1
    assert "is locked by pid" in proc.stdout and "the shell" in proc.stdout, "the outsider is told who holds it"
    assert (tmp_path / "data" / ".tprimat" / "data.lock").read_text() == ""


def test_data_stages_and_data_sh_refuse_a_locked_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = tiny_environ(data_dir, tmp_path / "out")
    with hold(data_lock_path(data_dir), f"DATA_DIR {data_dir}", command="another preparation"):
        stage = subprocess.run([sys.executable, "-m", "data.fetch", "--no-progress"], env=env, cwd=REPO,
                               capture_output=True, text=True, timeout=120)
        shell = subprocess.run(["bash", str(REPO / "shell" / "data.sh"), "--no-progress"], env=env, cwd=REPO,
                               capture_output=True, text=True, timeout=120)
    for proc in (stage, shell):
        assert proc.returncode == 1, proc.stderr
        assert f"DATA_DIR {data_dir} is locked by pid {os.getpid()}" in proc.stderr
        assert "another preparation" in proc.stderr and "Traceback" not in proc.stderr
    assert "== data.fetch ==" not in shell.stdout
    assert not (data_dir / "sample" / "raw.jsonl").exists()


def test_two_launchers_for_one_result_file(tmp_path: Path) -> None:
    env = tiny_environ(tmp_path / "data", tmp_path / "out")
    result = tmp_path / "out" / "train_cpu_tran_llama.json"
    result.parent.mkdir(parents=True)
    result.write_text("the other job's")
    with hold(result_lock_path(result), "r", command="the other launcher"):
        proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                               "--model", "llama"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert f"the result {result.name} is locked by pid {os.getpid()}" in proc.stderr
    assert "the other launcher" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert result.read_text() == "the other job's", "the holder's result is left alone"
