"""Reading results: comparison, validation, extraction, the GPU check, the history.

Run as ``python -m evaluate.<module>``, every entry point answers SIGINT/SIGTERM/SIGHUP with one line and
128 + n, from the first import on (``utils/io/signals.py``).
"""

from utils.io.signals import answer_signals_when_run

answer_signals_when_run(__name__)
