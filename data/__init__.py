"""tprimat data pipeline: fetch -> clean -> encode -> verify (see docs/ARCHITECTURE.md).

Run as ``python -m data.<stage>``, every stage answers SIGINT/SIGTERM/SIGHUP with one line and 128 + n, from the
first import on (``utils/io/signals.py``; a stage's own handler, ``data/common.py``, takes over once set).
"""

from utils.io.signals import answer_signals_when_run

answer_signals_when_run(__name__)
