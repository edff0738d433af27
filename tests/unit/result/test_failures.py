"""utils/result/failures.py: what a job that left no result said last, quoted in its reason."""

from __future__ import annotations

import signal
from pathlib import Path

from utils.result.failures import LOG_TAIL_LINES, is_interrupted, log_tail

BLANK_LINES = 2


def test_the_log_tail_is_the_last_lines_without_trailing_blanks(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    last = LOG_TAIL_LINES + 4
    log.write_text("".join(f"line {n}\n" for n in range(last + 1)) + "\n" * BLANK_LINES)
    tail = log_tail(log).splitlines()
    assert tail[-1] == f"line {last}" and len(tail) == LOG_TAIL_LINES - BLANK_LINES
    assert log_tail(log, lines=BLANK_LINES + 1) == f"line {last}"


def test_no_log_is_said_so(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "missing.log") == "(no log)"


def test_a_signal_or_its_shell_code_is_an_interruption() -> None:
    assert is_interrupted(-signal.SIGTERM) and is_interrupted(128 + signal.SIGTERM)
    assert is_interrupted(128 + signal.SIGINT)
    assert not is_interrupted(1) and not is_interrupted(0) and not is_interrupted(None)
