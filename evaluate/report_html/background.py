"""The results database read by a second process while this one loads matplotlib and the results (issue 37).

On the quick benchmark the page is mostly imports: matplotlib, numpy and the result model take about 1.7 s of
CPU before the first figure, SQLAlchemy 0.35 s more, and the database needs neither matplotlib nor the results. So
``python -m evaluate.report_html`` forks first of all (:class:`HistoryReader`, before its own heavy imports): the
child imports SQLAlchemy and the history modules and waits; this process sends it the request
(:func:`evaluate.report_html.database.history_request`: plain data) once the comparison is built, and takes the answer
when the page reaches its history section, after the model figures. On two cores the child's work is off the page's
path, and this process never loads SQLAlchemy: the trend figure is drawn here from the series it gets
(evaluate/history/trend_plot.py).

The page is the same either way: the child runs :func:`evaluate.report_html.database.query_history`, the function this
process runs where there is no child. There is none where ``fork`` is missing or this process already runs other
threads (a test runner's: a fork copies no thread and may copy a lock another thread held). A child that ends
without an answer (killed, or an error of its own) is replaced by the same read here, so any error shows here with
its traceback. The child ignores SIGINT/SIGTERM/SIGHUP handling of its own (default actions): this process answers
them (evaluate/report_html/cli.py) and ends the child.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection

from evaluate.report_html.database import HistoryFacts, HistoryRequest, query_history, with_trend

_JOIN_S = 5.0  # how long close() waits for the child to end after it was told to


def _serve(conn: Connection) -> None:
    """The child: import the database's modules, then answer one request with its facts (nothing on an error)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(ImportError):  # no SQLAlchemy: query_history says so, in either process
        import evaluate.history.diff
        import evaluate.history.query
        import evaluate.history.store
        import evaluate.history.trend  # noqa: F401
    try:
        request = conn.recv()
        facts = query_history(request)
        conn.send(facts)
    except Exception:  # the parent reads the database itself and shows the error with its own traceback
        pass
    finally:
        conn.close()


class HistoryReader:
    """The page's history part: read by a child process started at once, or here when there is none."""

    def __init__(self, fork: bool = True) -> None:
        """``fork``: start the child now (where it is safe, see the module's docstring); False: read here."""
        self._request: HistoryRequest | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        if not fork or not hasattr(os, "fork") or threading.active_count() > 1:
            return
        context = multiprocessing.get_context("fork")
        here, there = context.Pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered before the fork is written twice
            stream.flush()
        self._process = context.Process(target=_serve, args=(there,), name="report_html-history", daemon=True)
        self._process.start()
        there.close()
        self._conn = here

    @property
    def forked(self) -> bool:
        """Whether a child reads the database (until its answer is taken)."""
        return self._process is not None

    def ask(self, request: HistoryRequest) -> None:
        """Send ``request`` to the child (it reads while this process draws the model figures)."""
        self._request = request
        if self._conn is not None:
            try:
                self._conn.send(request)
            except OSError:  # the child is gone: read here
                self.close()

    def answer(self) -> HistoryFacts:
        """The history part with its trend figure: the child's facts, else read in this process."""
        if self._request is None:
            raise RuntimeError("HistoryReader.answer() before ask()")
        facts = None
        if self._conn is not None:
            with contextlib.suppress(EOFError, OSError):
                facts = self._conn.recv()
            self.close()
        return with_trend(facts if isinstance(facts, HistoryFacts) else query_history(self._request))

    def close(self) -> None:
        """End the child (idempotent): after its answer, on a signal, or when the page is not written."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
            self._process.join(_JOIN_S)
            self._process = None
