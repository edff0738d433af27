"""Failure classification: the one place that turns an ending into a status and a reason.

An exit code, a log and the steps done become ``ok``, ``incomplete`` or ``failed`` with a one-line reason; log lines
that explain a failure (out of memory, NCCL/RCCL errors, NaN) are recognised by one table, whatever the framework.
"""

from __future__ import annotations

import re
import signal
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from utils.schema.measures import Problem

# Exit codes of a process stopped by SIGINT/SIGTERM (128 + signal), as shells and torchrun report them.
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED_CODES = tuple(128 + int(s) for s in INTERRUPT_SIGNALS)
MAX_REASON_CHARS = 400
TAIL_LINES = 400
LOG_TAIL_LINES = 30  # the lines a reason quotes when the job left no result and no cause was found

# A trainer's own one-line refusal before its first step (``trainer_error``, printed by train/tran/worker.py for tran
# and deep): the cause itself, preferred to the traceback torchrun prints after it.
TRAINER_ERROR_KIND = "trainer error"


def trainer_error(framework: str, text: str) -> str:
    """The line a trainer prints when it refuses to start; :func:`classify_line` knows it as the cause."""
    return f"train_{framework}: error: {text}"


# Problems that make a run failed even when its exit code is 0, most specific first.
PROBLEM_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("out of memory", re.compile(r"out of memory|OutOfMemoryError|HIP_ERROR_OutOfMemory", re.IGNORECASE)),
    ("NCCL/RCCL error", re.compile(
        r"\b[NR]CCL (?:error|Error|ERROR)|nccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage|"
        r"InvalidArgument)Error|DistBackendError|Watchdog caught collective operation timeout|"
        r"ProcessGroupNCCL.*(?:Timeout at NCCL work|NCCL error|Exception)|NCCL communicator was aborted"
    )),
    ("NaN loss", re.compile(
        r"found NaN|NaN (?:detected|in (?:local )?grad|loss)|is NaN|Unexpected result nan|loss is nan",
        re.IGNORECASE,
    )),
    (TRAINER_ERROR_KIND, re.compile(r"\btrain_[a-z]+: error: ")),
)
EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:?.*")
# Every pattern above needs one of these words (case-insensitive): a line without any is no problem line,
# found without running the regexes (a long log has millions of lines, and almost none of them are problems).
TRIGGER_WORDS = ("memory", "error", "exception", "nan", "watchdog", "timeout at nccl work", "communicator was aborted")


def is_interrupted(returncode: int | None) -> bool:
    """A negative code (killed by a signal, as subprocess reports it) or 128 + SIGINT/SIGTERM."""
    return returncode is not None and (returncode < 0 or returncode in INTERRUPTED_CODES)


def classify_line(line: str, line_no: int | None = None) -> Problem | None:
    """The problem a log line reports (OOM, NCCL/RCCL, NaN, or another exception), or None."""
    lowered = line.lower()
    if not any(word in lowered for word in TRIGGER_WORDS):
        return None
    for kind, pattern in PROBLEM_PATTERNS:
        if pattern.search(line):
            return Problem(kind=kind, line_no=line_no, text=line.strip()[:MAX_REASON_CHARS])
    if EXCEPTION_LINE.match(line) and not line.lstrip().startswith(("Traceback", "warnings.warn")):
        return Problem(kind="exception", line_no=line_no, text=line.strip()[:MAX_REASON_CHARS])
    return None


def classify_lines(lines: Iterable[str], first_line_no: int = 1) -> list[Problem]:
    """Every problem line of ``lines``, in order."""
    found = []
    for number, line in enumerate(lines, start=first_line_no):
        problem = classify_line(line, number)
        if problem is not None:
            found.append(problem)
    return found


def likely_cause(problems: Iterable[Problem]) -> Problem | None:
    """The most telling problem: a known kind (OOM, NCCL, NaN) before a generic exception, last first."""
    problems = list(problems)
    for kind, _ in PROBLEM_PATTERNS:
        hits = [p for p in problems if p.kind == kind]
        if hits:
            return hits[0]
    return problems[-1] if problems else None


def cause_in_log(path: Path, lines: int = TAIL_LINES) -> Problem | None:
    """The likely cause of a failure in the last ``lines`` lines of a log, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            tail = list(deque(handle, maxlen=lines))
    except OSError:
        return None
    return likely_cause(classify_lines(tail))


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log as one text (``(no log)`` when it cannot be read): what a job that left no
    result and named no cause said last."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return "(no log)"


def shorten(text: str, limit: int = MAX_REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def final_status(status: str, error: str | None, done: int, expected: int) -> tuple[str, str | None]:
    """Finalise a run's (status, error) from the steps it recorded. ``ok`` needs every expected step; fewer makes it
    ``incomplete``. A run that already ended ``incomplete`` or ``failed`` keeps its reason with the count appended ("...
    (3 of 10 steps done)")."""
    if status == "ok":
        if error:
            raise ValueError("status ok cannot carry an error")
        if done < expected:
            return "incomplete", f"only {done} of {expected} steps ran"
        return "ok", None
    if not error:
        raise ValueError(f"status {status} needs a reason")
    return status, f"{error} ({done} of {expected} steps done)"
