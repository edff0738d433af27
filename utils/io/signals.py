"""How a command-line entry point answers a signal: one line and exit 128 + the signal's number.

Why (issue 33): Ctrl-C in ``evaluate.compare`` and ``evaluate.validate`` printed a KeyboardInterrupt traceback,
also during the start-up imports (matplotlib, pydantic), and SIGHUP ended them without a word. A package whose
modules are entry points calls :func:`answer_signals_when_run` in its ``__init__.py`` (``evaluate``, ``data``,
``utils``): when Python runs one of its own modules with ``-m`` (``sys.argv[0]`` is ``"-m"`` while the package is
imported), SIGINT, SIGTERM and SIGHUP are answered from then on, imports included; imported as a library (tests,
another package's entry point), nothing changes. ``train`` is left out: the launcher and the trainers inside a job
answer signals themselves (``train/launch/job_guard.py``).

The handler raises ``SystemExit`` (after one line on stderr), so ``finally`` blocks and context managers run:
an atomic write's temporary file is removed, a lock released; nothing is left behind.
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
    """:func:`answer_signals` when a module of ``package`` runs as ``python -m`` (and is being imported: a later
    import of the package by another program's code changes nothing); nothing otherwise.

    ``only``: the modules of ``package`` that answer (``python -m`` names); the others keep Python's defaults.
    """
    module = _run_module()
    if sys.argv[:1] != ["-m"] or module is None:
        return
    if only is not None:
        if module in only:
            answer_signals()
    elif module == package or module.startswith(package + "."):
        answer_signals()
