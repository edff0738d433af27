"""Work of the page done by forked children in parallel with this process: the page is the same without them.

On the quick benchmark the page is mostly imports: matplotlib, numpy and the result model take about 1.4 s of
CPU before the first figure, SQLAlchemy 0.35 s more, and each model's figure about 0.3 s. On the 2-core machine,
where the page must be written in 2 s (issue 37), two children take work off this process's path:

- :class:`HistoryReader`, forked first of all (evaluate/report_html/cli.py, before its heavy imports): the child
  imports SQLAlchemy and the history modules and waits; this process sends it the request
  (:func:`evaluate.report_html.database.history_request`: plain data) once the comparison is built, and takes the
  answer when the page reaches its history section. This process never loads SQLAlchemy: it draws the trend
  figure from the series it gets (evaluate/history/trend_plot.py).
- :class:`InChild`, forked once everything is loaded (evaluate/report_html/page.py): the child builds every other
  model's section (mostly its figure) while this process builds the rest.

Either child runs the very function this process runs where there is none: there is none off Linux (no
``fork``, or macOS, where a fork after some system libraries loaded may crash) or where this process already runs
other threads (a fork copies no thread, and may copy a lock another thread held). A child that ends without an
answer (killed, or an error of its own) is replaced by the same work here, so an error shows here with its
traceback. A child takes the default action on SIGINT/SIGTERM/SIGHUP: this process answers them (cli.py) and ends
its children.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

from evaluate.report_html.database import HistoryFacts, HistoryRequest, query_history, with_trend

T = TypeVar("T")
_JOIN_S = 5.0  # how long closing waits for a child to end after it was told to


def _fork(target: Callable[..., None], fork: bool) -> tuple[BaseProcess, Connection] | None:
    """A forked child running ``target(connection)`` and this process's end of the pipe; None: no child."""
    if not fork or not sys.platform.startswith("linux") or threading.active_count() > 1:
        return None
    context = multiprocessing.get_context("fork")
    here, there = context.Pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered before the fork is written twice
        stream.flush()
    process = context.Process(target=target, args=(there,), name="report_html-child", daemon=True)
    process.start()
    there.close()
    return process, here


def _end(child: tuple[BaseProcess, Connection] | None) -> None:
    if child is not None:
        process, conn = child
        conn.close()
        if process.is_alive():
            process.terminate()
        process.join(_JOIN_S)


def _as_child() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _receive(conn: Connection) -> tuple[Any] | None:
    """The child's value as ``(value,)``; None when it ended without one."""
    with contextlib.suppress(EOFError, OSError):
        answer = conn.recv()
        if isinstance(answer, tuple) and len(answer) == 1:
            return answer
    return None


class HistoryReader:
    """The page's history part: read by a child forked at once, or here when there is none."""

    def __init__(self, fork: bool = True) -> None:
        """``fork``: start the child now (where it is safe, see the module's docstring); False: read here."""
        self._request: HistoryRequest | None = None
        self._child = _fork(self._serve, fork)

    @staticmethod
    def _serve(conn: Connection) -> None:
        """The child: import the database's modules, then answer one request (nothing on an error)."""
        _as_child()
        with contextlib.suppress(ImportError):  # no SQLAlchemy: query_history says so, in either process
            import evaluate.history.diff
            import evaluate.history.query
            import evaluate.history.store
            import evaluate.history.trend  # noqa: F401
        with contextlib.suppress(Exception):  # the parent reads the database itself: the error shows there
            conn.send((query_history(conn.recv()),))
        conn.close()

    @property
    def forked(self) -> bool:
        """Whether a child reads the database (until its answer is taken)."""
        return self._child is not None

    def ask(self, request: HistoryRequest) -> None:
        """Send ``request`` to the child: it reads while this process draws the model figures."""
        self._request = request
        if self._child is not None:
            try:
                self._child[1].send(request)
            except OSError:  # the child is gone: read here
                self.close()

    def answer(self) -> HistoryFacts:
        """The history part with its trend figure: the child's facts, else read in this process."""
        if self._request is None:
            raise RuntimeError("HistoryReader.answer() before ask()")
        got = _receive(self._child[1]) if self._child is not None else None
        self.close()
        return with_trend(got[0] if got is not None else query_history(self._request))

    def close(self) -> None:
        """End the child (again: nothing): after its answer, on a signal, or when no page is written."""
        _end(self._child)
        self._child = None

    def __enter__(self) -> HistoryReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class InChild(Generic[T]):
    """``work()`` done by a child forked now; :meth:`result` its value, or ``work()`` done here where there is no
    child or it ended without a value. ``work`` must only read this process's state (the child's changes stay
    in the child) and return what pickles."""

    def __init__(self, work: Callable[[], T], fork: bool = True) -> None:
        self._work = work
        self._child = _fork(self._run, fork)

    def _run(self, conn: Connection) -> None:
        _as_child()
        with contextlib.suppress(Exception):  # this process does the work itself: the error shows there
            conn.send((self._work(),))
        conn.close()

    @property
    def forked(self) -> bool:
        return self._child is not None

    def result(self) -> T:
        got = _receive(self._child[1]) if self._child is not None else None
        self.close()
        return got[0] if got is not None else self._work()

    def close(self) -> None:
        """End the child (again: nothing): after its value, or when this process stops before taking it."""
        _end(self._child)
        self._child = None

    def __enter__(self) -> InChild[T]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
