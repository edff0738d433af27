"""A job's process under guard: its signals and its log (for ``train/launch/launcher.py``).

* :class:`Signals`: SIGINT/SIGTERM become a flag forwarded to the job's process group (a third kills it), so the
  launcher lives to record the job ``incomplete`` and exits 128 + the signal;
* :func:`run_logged`: a log that can no longer be written (full disk) does not block the job's output;
* :func:`die_with_parent`: torchrun gets SIGTERM when the launcher dies, even by SIGKILL, and frees ``MASTER_PORT``;
* :func:`job_scratch`: the job's own TMPDIR inside ``OUTPUT_DIR``'s bookkeeping folder, removed at the end
  (torchrun leaves ``torchelastic_<random>/`` behind otherwise).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from utils.io.output_path import LOCK_DIR

KILL_AFTER_SIGNALS = 3
# SIGHUP too (a closed terminal or ssh session, forwarded by shell/jobctl.sh): issue 33 found the job training on.
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Signals:
    """SIGINT/SIGTERM/SIGHUP while a job runs: remember the first, forward each to the job's process group."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.group: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in HANDLED}
        return self

    def __exit__(self, *_: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "no signal"

    def _handle(self, signum: int, _frame: Any) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
            # os.write: print() must not be re-entered from a signal handler
            os.write(2, f"tprimat: {signal.Signals(signum).name} received; stopping the job and recording it\n"
                     .encode())
        self.forward()

    def forward(self) -> None:
        """Send the signal (SIGKILL from the third on) to the job's process group, if one runs."""
        if self.group is None or self.signum is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.group, signal.SIGKILL if self.count >= KILL_AFTER_SIGNALS else self.signum)

    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum


class LineWatch(Protocol):
    """What sees a job's output as it arrives (``train/launch/target_watch.py``)."""

    def started(self, pid: int) -> None: ...

    def line(self, raw: str) -> None: ...


def run_logged(argv: list[str], env: dict[str, str], cwd: Path | None, log_path: Path, signals: Signals,
               header: str | None = None, watch: LineWatch | None = None) -> int:
    """Run ``argv`` in its own process group with its output tee'd to ``log_path``.

    ``header`` is written as the log's first line: it marks the log as a tprimat launch for
    log analysis (``train/logs/analyse.py``). ``watch`` sees each line on arrival. Returns the exit code
    (negative: killed by that signal; 127: could not start).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # Line-buffered: each line reaches the kernel at once (a killed launcher loses none, a full disk shows).
    log = open(log_path, "w", encoding="utf-8", buffering=1)  # noqa: SIM115 - closed below, errors handled per line
    try:
        if header:
            with contextlib.suppress(OSError):
                log.write(header + "\n")
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, text=True, errors="replace", bufsize=1,
                                    preexec_fn=die_with_parent)  # two syscalls between fork and exec
        except OSError as exc:
            with contextlib.suppress(OSError):
                log.write(f"tprimat: cannot start {argv[0]}: {exc}\n")
            return 127
        signals.group = proc.pid
        signals.forward()  # a signal that arrived while the job was being started
        if watch is not None:
            watch.started(proc.pid)
        logging = showing = True
        assert proc.stdout is not None
        for line in proc.stdout:
            if watch is not None:
                watch.line(line)
            if showing:
                try:
                    sys.stdout.write(line)
                except (BrokenPipeError, OSError):
                    showing = False
            if logging:
                try:
                    log.write(line)
                except OSError as exc:
                    logging = False
                    print(f"tprimat: cannot write the log {log_path} any more ({exc.strerror or exc}); "
                          "the job goes on, its output is shown here only", file=sys.stderr)
        return proc.wait()
    finally:
        signals.group = None
        with contextlib.suppress(OSError):
            log.close()
        with contextlib.suppress(OSError):
            sys.stdout.flush()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if sys.platform == "linux" else None


def die_with_parent() -> None:
    """In the child between fork and exec: SIGTERM when the launcher dies (Linux ``PR_SET_PDEATHSIG``).

    Elsewhere nothing: the job's own process group (:class:`Signals`) and ``shell/train.sh``'s end of the
    run (``utils/files/run_owner.py``) still stop it.
    """
    if _LIBC is None:
        return
    launcher = os.getppid()
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != launcher:  # the launcher died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def job_scratch(output_dir: Path, name: str) -> Iterator[Path | None]:
    """``<OUTPUT_DIR>/.tprimat/scratch/<name>-<pid>``, made for one job's run and removed after it, however it ends
    (None when it cannot be made: the job runs as before, its processes' leftovers in TMPDIR).

    A launcher killed by SIGKILL leaves it inside ``OUTPUT_DIR``, where ``shell/purge.sh`` removes the bookkeeping
    folder with the rest (utils/files/generated.py).
    """
    folder = Path(output_dir) / LOCK_DIR / "scratch" / f"{name}-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        yield None
        return
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
