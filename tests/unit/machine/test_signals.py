"""How entry points answer a signal (utils/io/signals.py; train/__init__.py for train's).

Issue 33's hostile pass (case S07): ``python -m train.launch.jobs`` answered SIGINT with a KeyboardInterrupt
traceback, because ``train`` was left out of the answer as a whole (its launcher and trainers handle signals
themselves). Now each ``python -m train...`` entry point is either answered (no job inside it) or listed as one
that handles its own; a new one must be put in one of the two lists.
"""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import train
from tests.helpers.paths import REPO
from tests.helpers.proc import signals_at_default
from tests.helpers.shell import clean_env


def _entry_points() -> set[str]:
    """Every ``python -m train...`` module: a ``__main__.py`` (its package) or a module with a main guard."""
    found = set()
    for path in (REPO / "train").rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        if path.name == "__main__.py":
            found.add(".".join(parts[:-1]))
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # a top-level `if __name__ == "__main__":`
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
                    and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
                    and [getattr(c, "value", None) for c in node.test.comparators] == ["__main__"]):
                found.add(".".join(parts))
                break
    return found


def test_every_train_entry_point_is_answered_or_handles_its_own() -> None:
    answered, own = set(train.ANSWERED), set(train.OWN_HANDLERS)
    assert not answered & own, answered & own
    assert _entry_points() == answered | own, "put each entry point of train/ in train.ANSWERED or train.OWN_HANDLERS"


def _caught(pid: int, signum: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(mask, 16) & (1 << (signum - 1)))


@pytest.mark.parametrize(("argv", "signum"), [
    (["train.launch.jobs", "--platform", "cpu"], signal.SIGINT),
    (["train.launch.preflight", "--platform", "cpu", "--framework", "tran", "--model", "llama"], signal.SIGTERM),
    (["train.profiles"], signal.SIGHUP),
    (["utils.files.purge", "--help"], signal.SIGINT),  # the hostile pass's S06
    (["data.fetch", "--help"], signal.SIGTERM),  # S08
], ids=["jobs-SIGINT", "preflight-SIGTERM", "profiles-SIGHUP", "purge-SIGINT", "fetch-SIGTERM"])
def test_an_entry_point_without_a_job_answers_a_signal_in_one_line(tmp_path: Path, argv: list[str],
                                                                   signum: int) -> None:
    with signals_at_default(signal.SIGINT, signal.SIGHUP):  # an ignored one stays ignored (nohup, `cmd &`)
        proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=REPO, env=clean_env(tmp_path, PLATFORM="cpu"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The package's first import installs the answer (SIGHUP caught: Python alone does not); start-up goes on.
    deadline = time.monotonic() + 60
    while not _caught(proc.pid, signal.SIGHUP) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is not None:
        proc.communicate()
        pytest.skip("the command finished before the signal was sent")  # a fast machine: nothing to answer
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    if proc.returncode in (0, 1, 2):
        pytest.skip("the command finished before the signal arrived")
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and err.strip().splitlines() == [f"python -m {argv[0]}: stopped by {name}"], err


@pytest.mark.parametrize(("module", "answered"), [("train.launch.jobs", True), ("train.profiles", True),
                                                 ("train.launch", False), ("train.tran.worker", False)])
def test_only_the_listed_modules_are_answered(module: str, answered: bool) -> None:
    """As ``python -m <module>`` imports ``train``: the launcher and the trainers keep their own handlers
    (``train/launch/job_guard.py`` forwards and records), the others answer from that import on."""
    code = (f"import signal, sys; sys.argv[:1] = ['-m']; sys.orig_argv = [sys.executable, '-m', {module!r}]; "
            "import train; print(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == str(answered), proc.stderr
