"""The streaming scan of a training log: iterations, memory reports, problems, and what the log says ran.

Lines past :data:`MAX_LINE_BYTES` are cut and counted in ``warnings``; a truncated final line is a warning, never
used; an iteration logged twice is kept once. :func:`merge_scans` joins per-rank logs.
"""

from __future__ import annotations

import io
import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from train.logs.arguments import ArgumentsReader
from train.logs.patterns import (
    LIGHTNING_WORLD,
    LOGURU_RANK,
    NEMO_FORMAT,
    NEMO_PREFIX,
    PLATFORM_MARKERS,
    PLATFORM_WORDS,
    PRIMUS_WORLD,
    EvaluationLine,
    IterationRecord,
    MemoryReport,
    clean_line,
    eval_timer_seconds,
    log_format,
    message_of,
    nemo_validation_step,
    padded_vocab,
    parse_evaluation,
    parse_iteration,
    parse_launch_header,
    parse_memory,
    world_line,
)
from utils.measure.plausible import MAX_STEP_TIME_S, STEP_TIME_FLOOR_S, step_time_problem
from utils.result.failures import classify_line
from utils.schema.measures import Problem

TAIL_LINES = 10
MAX_LINE_BYTES = 64 * 1024  # an iteration line is well under 1 KiB; a longer line is cut here
SNIFF_BYTES = 8192
MAX_WARNINGS = 50  # per scan: a pathological log must not grow its warning list without bound


# The frameworks whose output the scan recognises (its framework_hint), by utils/spec/registry.py key.
LOG_FRAMEWORKS = ("mega", "prim", "nemo")


class LogInputError(ValueError):
    """A file or a run that cannot become a result (empty, binary, unrecognisable, self-contradicting)."""


@dataclass
class LogScan:
    """Everything parsed from one log (or, with ``kind="tensorboard"``, from one run's event files)."""

    iterations: list[IterationRecord] = field(default_factory=list)
    evaluations: list[EvaluationLine] = field(default_factory=list)
    validation_steps: int | None = None  # global batches per evaluation, where only NeMo's printer states them
    memory: list[MemoryReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # OOM, NCCL/RCCL, NaN
    exceptions: list[Problem] = field(default_factory=list)  # any other exception line
    warnings: list[str] = field(default_factory=list)
    padded_vocab: int | None = None
    line_count: int = 0
    log_format: str | None = None
    last_lines: list[str] = field(default_factory=list)
    kind: str = "log"  # log | tensorboard
    files: list[Path] = field(default_factory=list)
    arguments: dict[str, str] = field(default_factory=dict)  # Megatron's arguments block, as printed
    arguments_at: str | None = None  # "file:line" of the block used
    world: dict[str, int] = field(default_factory=dict)  # Megatron's "using world size" line
    world_sizes: dict[str, int] = field(default_factory=dict)  # where a world size was stated -> the size
    launch: dict[str, str] | None = None  # tprimat's launch header
    platform_evidence: dict[str, str] = field(default_factory=dict)  # platform -> "file:line: text"
    primus_prefix: bool = False  # Primus's loguru prefix seen
    # Each entry of a log that prints every k-th iteration is the framework's average over its
    # interval (Megatron, NeMo's printer); TensorBoard's Lightning events are single-step samples.
    interval_is_average: bool = True
    truncated: str | None = None  # why the source ends early (a cut event file), if it does

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

    @property
    def recognised(self) -> bool:
        """Whether anything in the file is a training log's: iterations, arguments or tprimat's header."""
        return bool(self.iterations or self.arguments or self.launch)

    @property
    def framework_hint(self) -> str | None:
        """Which framework printed the log, judged by its lines (mega, prim or nemo); None if no sign."""
        if (self.log_format or "").startswith(NEMO_PREFIX) or "Lightning world size" in self.world_sizes:
            return "nemo"
        if self.primus_prefix or (self.log_format or "").startswith("primus"):
            return "prim"
        if self.iterations or self.arguments:
            return "mega"
        return None

    def warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)


def _same_measurement(a: IterationRecord, b: IterationRecord) -> bool:
    return (a.step_time_s, a.loss, a.learning_rate) == (b.step_time_s, b.loss, b.learning_rate)


def _note_world(scan: LogScan, label: str, size: int) -> None:
    previous = scan.world_sizes.setdefault(label, size)
    if previous != size:
        scan.warn(f"{label} says {size} after saying {previous}: the log holds more than one run?")


def _context_line(scan: LogScan, message: str, line: str, line_no: int, where: str) -> None:
    """World size, launch header, platform evidence and the vocabulary from a non-iteration line."""
    if "world size" in message:
        sizes = world_line(message)
        if sizes is not None:
            scan.world = scan.world or sizes
            _note_world(scan, "the 'using world size' line", sizes["world_size"])
    if message.startswith("-world_size:"):
        match = PRIMUS_WORLD.match(message)
        if match:
            _note_world(scan, "Primus's -world_size line", int(match.group(1)))
    if "MEMBER:" in message:
        match = LIGHTNING_WORLD.search(message)
        if match:
            _note_world(scan, "Lightning world size", int(match.group(1)))
    if scan.launch is None and message.startswith("tprimat launch:"):
        scan.launch = parse_launch_header(message)
    if len(scan.platform_evidence) < 2 and any(word in message.lower() for word in PLATFORM_WORDS):
        marker = PLATFORM_MARKERS.search(line)
        if marker is not None and marker.lastgroup not in scan.platform_evidence:
            scan.platform_evidence[marker.lastgroup] = f"{where}{line_no}: {line.strip()[:160]}"
    vocab = padded_vocab(line) if "padded vocab" in line else None
    if vocab is not None:
        scan.padded_vocab = vocab


class EvaluationReader:
    """The evaluations of one log, fed line by line: Megatron/Primus validation lines, NeMo's ``val_loss``
    (a timer's or value's line is kept until the line it belongs to, which comes later)."""

    def __init__(self) -> None:
        self.evaluations: list[EvaluationLine] = []
        self.validation_steps: int | None = None  # NeMo's ``Validation: iteration i/n``: n global batches
        self._seconds: float | None = None
        self._nemo_block = False

    def feed(self, message: str, line_no: int) -> bool:
        """Whether ``message`` was an evaluation's line (a timer entry, a validation line or NeMo's step)."""
        seconds = eval_timer_seconds(message)
        if seconds is not None:
            self._seconds = seconds
            return True
        found = parse_evaluation(message, line_no)
        if found is not None:
            found.eval_seconds, self._seconds = self._seconds, None
            self.evaluations.append(found)
            return True
        steps = nemo_validation_step(message)
        if steps is not None:
            self._nemo_block, self.validation_steps = True, steps
            return True
        return False

    def nemo_iteration(self, record: IterationRecord) -> None:
        """A NeMo training line: after a validation block, its ``val_loss`` is that evaluation's (after the
        step before it)."""
        if self._nemo_block and record.val_loss is not None:
            self.evaluations.append(EvaluationLine(iteration=record.iteration - 1, loss=record.val_loss,
                                                   line_no=record.line_no, key="val_loss", log_format=NEMO_FORMAT))
        self._nemo_block = False


def scan_lines(lines: Iterable[str], source: Path | None = None) -> LogScan:
    """Parse a log given as lines (each with its ``\\n``, except a cut-off last one)."""
    scan = LogScan(files=[source] if source else [])
    where = f"{source.name}:" if source else "line "
    arguments = ArgumentsReader()
    evaluations = EvaluationReader()
    seen: dict[int, IterationRecord] = {}
    duplicates = conflicting = out_of_range = 0
    ends_with_newline = True
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    for line_no, raw in enumerate(lines, start=1):
        scan.line_count = line_no
        ends_with_newline = raw.endswith("\n")
        line = clean_line(raw)
        if line.strip():
            tail.append(line.strip())
        rank = LOGURU_RANK.match(line) if line.startswith("[") else None
        if rank is not None:
            scan.primus_prefix = True
            _note_world(scan, "Primus's [rank-r/N] prefix", int(rank.group(2)))
        message = message_of(line) if line.startswith(("[", "(", " [")) else line
        if arguments.feed(message, line_no) or evaluations.feed(message, line_no):
            continue
        record = parse_iteration(line, line_no)
        if record is not None:
            evaluations.nemo_iteration(record)
            if record.step_time_s is None:
                place = "the last line (truncated)" if not ends_with_newline else f"line {line_no}"
                scan.warn(f"iteration {record.iteration} on {place} has no elapsed time: ignored")
            elif step_time_problem(record.step_time_s) is not None:
                out_of_range += 1  # utils/measure/plausible.py: negative, NaN, 1e308 ... (issue 33)
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
        _context_line(scan, message, line, line_no, where)
        problem = classify_line(line, line_no)
        if problem is not None:
            (scan.exceptions if problem.kind == "exception" else scan.problems).append(problem)
    arguments.finish()
    scan.evaluations, scan.validation_steps = evaluations.evaluations, evaluations.validation_steps
    if arguments.found:
        scan.arguments, scan.arguments_at = arguments.values, f"{where}{arguments.line_no}"
    for text in arguments.warnings:
        scan.warn(text)
    scan.last_lines = list(tail)
    if out_of_range:
        scan.warn(f"{out_of_range} iteration(s) with a step time no step can take (negative, not finite, under "
                  f"{STEP_TIME_FLOOR_S:g} s or over {MAX_STEP_TIME_S:g} s): dropped")
    if conflicting:
        scan.warn(f"{conflicting} iteration(s) logged twice with different values: the first kept")
    elif duplicates:
        scan.warn(f"{duplicates} duplicate iteration line(s) (e.g. forwarded to rank 0) ignored")
    if not ends_with_newline and scan.line_count:
        scan.warn("the log's last line has no newline: the log was cut off mid-line")
    return scan


@dataclass
class LineStats:
    """What :func:`read_lines` had to cut."""

    cut_lines: int = 0
    first_cut: int | None = None


def read_lines(path: Path, stats: LineStats | None = None, max_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of ``path``, one at a time, none longer than ``max_bytes`` characters. ``\\r\\n``, ``\\r`` and ``\\n``
    each end a line (issue 33: a log with CR-only line ends was one line)."""
    stats = stats if stats is not None else LineStats()
    with open(path, "rb") as binary, io.TextIOWrapper(binary, encoding="utf-8", errors="replace",
                                                       newline=None) as handle:
        line_no = 0
        while raw := handle.readline(max_bytes):
            line_no += 1
            if len(raw) == max_bytes and not raw.endswith("\n"):
                dropped, rest = 0, ""
                while (rest := handle.readline(max_bytes)) and not rest.endswith("\n"):
                    dropped += len(rest)
                dropped += len(rest)
                if dropped:
                    stats.cut_lines += 1
                    stats.first_cut = stats.first_cut or line_no
                    raw += "\n" if rest.endswith("\n") else ""
            yield raw


def not_a_text_log(path: Path) -> str | None:
    """Why ``path`` cannot be a text log (empty, binary), judged from its first bytes; None if it may be one."""
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head:
        return "empty file"
    if b"\x00" in head:
        return "binary file (NUL bytes), not a text log"
    text = head.decode("utf-8", errors="replace")
    if text.count("\ufffd") > len(text) // 10:
        return "binary file (mostly not UTF-8 text), not a text log"
    return None


def scan_file(path: Path) -> LogScan:
    """Scan one log file (``OSError`` when it cannot be opened)."""
    stats = LineStats()
    scan = scan_lines(read_lines(path, stats), source=Path(path))
    if stats.cut_lines:
        scan.warn(f"{stats.cut_lines} line(s) longer than {MAX_LINE_BYTES // 1024} KiB cut there (first: line "
                  f"{stats.first_cut}): not a Megatron/Primus/NeMo line")
    return scan


def iteration_times(path: Path) -> list[tuple[int, str | None, float | None]]:
    """``(iteration, timestamp, step seconds)`` of the iterations :func:`scan_file` keeps, in its order: all the
    launcher's energy window (``train/launch/energy.py``) needs, so only the iteration lines are parsed."""
    kept: dict[int, tuple[int, str | None, float | None]] = {}
    for line_no, raw in enumerate(read_lines(path), start=1):
        record = parse_iteration(clean_line(raw), line_no)
        if record is not None and record.step_time_s is not None and step_time_problem(record.step_time_s) is None:
            kept.setdefault(record.iteration, (record.iteration, record.timestamp, record.step_time_s))
    return list(kept.values())


def merge_scans(scans: list[LogScan]) -> LogScan:
    """One run's scan from the logs of its ranks or nodes (given rank 0 first). Iterations come from the log with the
    most iteration lines (the last rank prints them), the rest from the first log that has it; memory reports, problems
    and platform evidence from all (any rank may run out of memory)."""
    if not scans:
        return LogScan()
    primary = max(scans, key=lambda s: len(s.iterations))
    evaluated = max(scans, key=lambda s: (len(s.evaluations), s is primary))  # the last rank prints them
    merged = LogScan(iterations=primary.iterations, evaluations=evaluated.evaluations,
                     validation_steps=evaluated.validation_steps,
                     log_format=primary.log_format, last_lines=primary.last_lines,
                     line_count=primary.line_count, kind=primary.kind,
                     interval_is_average=primary.interval_is_average)
    by_iteration = {r.iteration: r for r in primary.iterations}
    main = primary.files[0].name if primary.files else "the main log"
    for scan in scans:
        label = f"{scan.files[0].name}: " if scan is not primary and scan.files else ""
        known = by_iteration.get
        if scan is not primary and not all(known(r.iteration) is not None and _same_measurement(r, known(r.iteration))
                                           for r in scan.iterations):
            merged.warn(f"{label}its iteration lines are not those of {main} (another run grouped by its name?): "
                        "not used")
        merged.files.extend(scan.files)
        merged.memory.extend(scan.memory)
        merged.problems.extend(scan.problems)
        merged.exceptions.extend(scan.exceptions)
        for text in scan.warnings:
            merged.warn(label + text)
        if not merged.arguments and scan.arguments:
            merged.arguments, merged.arguments_at = scan.arguments, scan.arguments_at
        merged.world = merged.world or scan.world
        for where, size in scan.world_sizes.items():
            _note_world(merged, where, size)
        merged.launch = merged.launch or scan.launch
        merged.padded_vocab = merged.padded_vocab or scan.padded_vocab
        merged.primus_prefix = merged.primus_prefix or scan.primus_prefix
        for platform, evidence in scan.platform_evidence.items():
            merged.platform_evidence.setdefault(platform, evidence)
    return merged
