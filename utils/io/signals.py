"""How a command-line entry point answers a signal: one line and exit 128 + the signal's number.

Why: Ctrl-C otherwise prints a KeyboardInterrupt traceback and SIGHUP ends a command without a word. A package of
entry points calls :func:`answer_signals_when_run` in its ``__init__.py`` (imported as a library nothing changes).
The handler raises ``SystemExit``, so ``finally`` blocks run: temporary files removed, locks released.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Collection
from typing import Any

ANSWERED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _program() -> str:
    argv = getattr(sys, "orig_argv", [])
    if "-m" in argv[:-1]:
        return "python -m " + argv[argv.index("-m") + 1]
    return os.path.basename(sys.argv[0]) if sys.argv else "tprimat"


def answer_signals(program: str | None = None) -> None:
    """From now on SIGINT, SIGTERM and SIGHUP end this process with one line and 128 + n."""
    name = program or _program()

    def handle(signum: int, _frame: Any) -> None:
        for each in ANSWERED:  # a second signal while unwinding is not answered twice
            signal.signal(each, signal.SIG_IGN)
        os.write(2, f"{name}: stopped by {signal.Signals(signum).name}\n".encode())
        raise SystemExit(128 + signum)

    for signum in ANSWERED:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # ignored on entry (`cmd &`): stays ignored
            signal.signal(signum, handle)


def _run_module() -> str | None:
    argv = getattr(sys, "orig_argv", [])
    return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None


def answer_signals_when_run(package: str, only: Collection[str] | None = None) -> None:
    """:func:`answer_signals` when a module of ``package`` runs as ``python -m`` (``only``: the modules that
    answer); nothing when the package is imported as a library."""
    module = _run_module()
    if sys.argv[:1] != ["-m"] or module is None:
        return
    if only is not None:
        if module in only:
            answer_signals()
    elif module == package or module.startswith(package + "."):
        answer_signals()
