"""The processes the tests start: ``python -m`` from the repository root, a free port for a job's
rendezvous, and, for the signal tests, who descends from whom (read from /proc, Linux).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.helpers.paths import REPO

PYTHON = sys.executable

_SYSTEM_RANDOM = random.SystemRandom()


def run_module(module: str, *args: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``python -m module args`` from the repo root, capturing output."""
    return subprocess.run(
        [PYTHON, "-m", module, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def main_in_process(main: Callable[[list[str]], int | None], capture, *args: str) -> subprocess.CompletedProcess:
    """``python -m <module> ARGS`` as that module's ``main`` in this process, for a test that reads what the command
    writes and says, not how it starts (an interpreter spared): exit code, stdout, stderr. ``capture`` is pytest's
    ``capsys``; what it held before is dropped."""
    capture.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse, a config error
        code = exc.code if isinstance(exc.code, int) else 2
    out = capture.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def ephemeral_ports() -> range:
    """The kernel's range for outgoing connections and ``bind(0)`` (Linux's default when unreadable)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port free now, for MASTER_PORT, chosen at random below the kernel's ephemeral range.

    ``bind(0)`` hands out an ephemeral port, which any process's next outgoing connection (another
    clone's test, a rank's gloo socket) may take before the job listens on it. A random port from
    the range below, checked bindable on every interface, can only collide with another run's
    equally random pick. The OS's randomness, not ``random``'s: a test that seeds ``random`` would
    otherwise make two clones started together pick the same ports in the same order.
    """
    ephemeral = ephemeral_ports()
    candidates = [port for port in range(10000, 65536) if port not in ephemeral]
    for port in _SYSTEM_RANDOM.sample(candidates, min(50, len(candidates))):
        with socket.socket() as sock:
            try:
                sock.bind(("", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _parents() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        fields = stat[stat.rindex(")") + 2:].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, grandchildren, ...)."""
    parents = _parents()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return [p for p in found if _alive(p)]


def command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def all_gone(pids: list[int], timeout: float = 30) -> bool:
    """True once none of ``pids`` is alive (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def kill_tree(pid: int) -> None:
    """Last-resort cleanup after a failed test: SIGKILL everything below ``pid``, then ``pid``."""
    for target in [*descendants(pid), pid]:
        with contextlib.suppress(OSError):
            os.kill(target, 9)


def _keep(signum: int, frame: object) -> None:
    """A Python-level handler for the block below: exec resets it to the default in every child."""


@contextlib.contextmanager
def signals_at_default(*signums: int) -> Iterator[None]:
    """Processes started inside the block begin with these signals at their default disposition, not ignored.

    A suite started as ``cmd &`` by a non-interactive shell runs with SIGINT ignored, and under ``nohup`` with
    SIGHUP ignored; children inherit an ignored signal across exec, and bash cannot trap a signal that was
    ignored when it started. A signal test would then signal a script that never sees it and runs on (a fresh
    clone's run found the quickstart training after its SIGINT; two suites started with ``nohup`` timed out
    waiting for train.sh to answer SIGHUP). A Python-level handler is reset to the default by exec, so one is
    installed for the block: Python's own for SIGINT, a no-op for the others.
    """
    previous = {n: signal.signal(n, signal.default_int_handler if n == signal.SIGINT else _keep) for n in signums}
    try:
        yield
    finally:
        for n, handler in previous.items():
            signal.signal(n, handler)


def ignored_signals(pid: int) -> set[int]:
    """The signals ``pid`` ignores (``SigIgn`` in ``/proc/<pid>/status``)."""
    for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError(f"/proc/{pid}/status has no SigIgn line")
