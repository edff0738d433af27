"""Reading results: comparison, validation, extraction, the GPU check, the history.

Run as ``python -m evaluate.<module>``, every entry point answers SIGINT/SIGTERM/SIGHUP with one line and
128 + n, from the first import on (``utils/machine/signals.py``).
"""

from utils.machine.signals import answer_signals_when_run

answer_signals_when_run(__name__)
