"""The streaming scan of a Megatron-LM/Primus log: every iteration, memory report and problem line.

A log is read line by line (a multi-gigabyte log never sits in memory). Only
``\\n`` ends a line: a progress bar's ``\\r`` does not, so the file is read as bytes
and each line decoded on its own (invalid UTF-8 becomes U+FFFD, never an error).
Problem lines (out of memory, NCCL/RCCL, NaN, other exceptions) are classified by
``utils/failures.py``, the one classifier every producer uses.

A truncated final line or an iteration line without a step time is reported in
``warnings``, never used; an iteration logged twice (lines forwarded to rank 0) is
kept once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from train.logs.patterns import (
    IterationRecord,
    MemoryReport,
    clean_line,
    log_format,
    padded_vocab,
    parse_iteration,
    parse_memory,
)
from utils.failures import classify_line
from utils.result_model import Problem

TAIL_LINES = 10


@dataclass
class LogScan:
    """Everything parsed from one log."""

    iterations: list[IterationRecord] = field(default_factory=list)
    memory: list[MemoryReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # OOM, NCCL/RCCL, NaN
    exceptions: list[Problem] = field(default_factory=list)  # any other exception line
    warnings: list[str] = field(default_factory=list)
    padded_vocab: int | None = None
    line_count: int = 0
    log_format: str | None = None
    last_lines: list[str] = field(default_factory=list)

    @property
    def train_iters(self) -> int | None:
        return self.iterations[-1].train_iters if self.iterations else None

    @property
    def last_iteration(self) -> int:
        return max((r.iteration for r in self.iterations), default=0)

    @property
    def nan_steps(self) -> list[int]:
        return [r.iteration for r in self.iterations
                if (r.loss is not None and not math.isfinite(r.loss)) or (r.nan_iterations or 0) > 0]


def _same_measurement(a: IterationRecord, b: IterationRecord) -> bool:
    return (a.step_time_s, a.loss, a.learning_rate) == (b.step_time_s, b.loss, b.learning_rate)


def scan_lines(lines: Iterable[str]) -> LogScan:
    """Parse a log given as lines (each with its ``\\n``, except a cut-off last one)."""
    scan = LogScan()
    seen: dict[int, IterationRecord] = {}
    duplicates = conflicting = 0
    ends_with_newline = True
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    for line_no, raw in enumerate(lines, start=1):
        scan.line_count = line_no
        ends_with_newline = raw.endswith("\n")
        line = clean_line(raw)
        if line.strip():
            tail.append(line.strip())
        record = parse_iteration(line, line_no)
        if record is not None:
            if record.step_time_s is None:
                where = "the last line (truncated)" if not ends_with_newline else f"line {line_no}"
                scan.warnings.append(f"iteration {record.iteration} on {where} has no elapsed time: ignored")
            elif record.iteration in seen:
                duplicates += 1
                conflicting += not _same_measurement(seen[record.iteration], record)
            else:
                seen[record.iteration] = record
                scan.iterations.append(record)
                scan.log_format = scan.log_format or log_format(record, line)
            continue
        report = parse_memory(line)
        if report is not None:
            scan.memory.append(report)
            continue
        vocab = padded_vocab(line)
        if vocab is not None:
            scan.padded_vocab = vocab
            continue
        problem = classify_line(line, line_no)
        if problem is not None:
            (scan.exceptions if problem.kind == "exception" else scan.problems).append(problem)
    scan.last_lines = list(tail)
    if conflicting:
        scan.warnings.append(f"{conflicting} iteration(s) logged twice with different values: the first kept")
    elif duplicates:
        scan.warnings.append(f"{duplicates} duplicate iteration line(s) (e.g. forwarded to rank 0) ignored")
    if not ends_with_newline and scan.line_count:
        scan.warnings.append("the log's last line has no newline: the log was cut off mid-line")
    return scan


def read_lines(path: Path) -> Iterable[str]:
    """The lines of ``path``, one at a time; only ``\\n`` breaks a line."""
    with open(path, "rb") as handle:
        for raw in handle:
            yield raw.decode("utf-8", errors="replace")


def scan_file(path: Path) -> LogScan:
    """Scan one log file (``OSError`` when it cannot be opened)."""
    return scan_lines(read_lines(path))
