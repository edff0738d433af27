"""TensorBoard event files -> the same :class:`~train.logs.scan.LogScan` a text log gives.

Read with the ``tensorboard`` package's own ``PyRecordReader_New``, which checks each record's CRC
(``EventFileLoader`` stops silently: a truncated file must be reported). Tags are checked, never assumed (versions:
tests/fixtures/logs/README.md). Without a step-time tag, step times come from the events' wall-clock times.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors as tb_errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.util import tensor_util

from train.logs.arguments import MAX_ARGUMENTS
from train.logs.patterns import NEMO_PREFIX, IterationRecord, MemoryReport
from train.logs.scan import LogInputError, LogScan
from utils.measure.plausible import MAX_STEP_TIME_S, STEP_TIME_FLOOR_S, step_time_problem

TEXT_SUFFIX = "/text_summary"
MEGATRON_SCALARS = {
    "iteration-time": "step_time_s", "lm loss": "loss", "learning-rate": "learning_rate",
    "batch-size": "global_batch_size", "throughput": "tflops_per_gpu", "loss-scale": "loss_scale",
    "grad-norm": "grad_norm", "iter-energy/gpu": "energy_j_per_gpu", "power/gpu": "power_w_per_gpu",
}
MEGATRON_MEMORY = {"mem-allocated-bytes": "allocated", "mem-max-allocated-bytes": "max_allocated",
                   "mem-reserved-bytes": "reserved"}
LIGHTNING_SCALARS = {
    "train_step_timing in s": "step_time_s", "reduced_train_loss": "loss", "lr": "learning_rate",
    "global_batch_size": "global_batch_size", "TFLOPS_per_GPU": "tflops_per_gpu",
    "tokens_per_sec_per_gpu": "tokens_per_gpu",
}
MEGATRON_MARKERS = frozenset({"learning-rate", "batch-size", "lm loss", "iteration-time"})
LIGHTNING_MARKERS = frozenset({"reduced_train_loss", "train_step_timing in s", "global_step", "consumed_samples"})
INT_FIELDS = frozenset({"global_batch_size"})
MAX_TAGS_SHOWN = 12
BYTES_PER_GIB = 1024.0**3


def _records(path: Path, scan: LogScan) -> Iterator[bytes]:
    """The serialized events of one file; a cut or corrupt record ends the file with a warning."""
    reader = PyRecordReader_New(str(path), 0, None, None)
    count = 0
    try:
        while True:
            try:
                reader.GetNext()
            except tb_errors.OutOfRangeError:
                return
            except tb_errors.DataLossError as exc:
                scan.truncated = f"{path.name} is truncated or corrupt after {count} event(s)"
                scan.warn(f"{scan.truncated} ({exc.message}): the rest of the file is not read")
                return
            count += 1
            yield reader.record()
    finally:
        reader.file_handle.close()


def _values(event: event_pb2.Event) -> Iterator[tuple[str, float | str]]:
    """(tag, number or text) of every summary value in an event."""
    for value in event.summary.value:
        if value.HasField("simple_value"):
            yield value.tag, float(value.simple_value)
        elif value.HasField("tensor"):
            try:
                array = tensor_util.make_ndarray(value.tensor)
            except (TypeError, ValueError):
                continue
            if array.size != 1:
                continue
            item = array.reshape(-1)[0]
            if isinstance(item, bytes):
                yield value.tag, item.decode("utf-8", errors="replace")
            else:
                try:
                    yield value.tag, float(item)
                except (TypeError, ValueError):
                    continue


class _Collector:
    """Per-step values of every known tag, across the event files of one run."""

    def __init__(self, scan: LogScan) -> None:
        self.scan = scan
        self.tags: set[str] = set()
        self.scalars: dict[str, dict[int, float]] = {}
        self.wall: dict[int, float] = {}  # first event wall time per step
        self.events = 0

    def add(self, event: event_pb2.Event) -> None:
        self.events += 1
        for tag, value in _values(event):
            if len(self.tags) < 10_000:
                self.tags.add(tag)
            if isinstance(value, str):
                if tag.endswith(TEXT_SUFFIX) and len(self.scan.arguments) < MAX_ARGUMENTS:
                    self.scan.arguments.setdefault(tag[: -len(TEXT_SUFFIX)], value.strip())
                continue
            if tag in MEGATRON_SCALARS or tag in LIGHTNING_SCALARS or tag in MEGATRON_MEMORY:
                by_step = self.scalars.setdefault(tag, {})
                if event.step in by_step:
                    continue  # a restarted writer logging a step again: the first is kept
                by_step[event.step] = value
                self.wall.setdefault(event.step, event.wall_time)


def _flavour(tags: set[str]) -> str:
    if tags & MEGATRON_MARKERS:
        return "megatron"
    if tags & LIGHTNING_MARKERS:
        return "lightning"
    scalars = sorted(t for t in tags if not t.endswith(TEXT_SUFFIX))
    shown = ", ".join(scalars[:MAX_TAGS_SHOWN]) + (" ..." if len(scalars) > MAX_TAGS_SHOWN else "")
    raise LogInputError("no Megatron-LM or Lightning/NeMo training scalars in the event file(s) "
                        f"(tags: {shown or 'none'})")


def _records_by_step(collector: _Collector, flavour: str) -> dict[int, IterationRecord]:
    table = MEGATRON_SCALARS if flavour == "megatron" else LIGHTNING_SCALARS
    offset = 0 if flavour == "megatron" else 1  # Lightning's step is 0-based
    train_iters = None
    if flavour == "megatron" and collector.scan.arguments.get("train_iters", "").isdigit():
        train_iters = int(collector.scan.arguments["train_iters"])
    records: dict[int, IterationRecord] = {}
    for tag, field_name in table.items():
        for step, value in collector.scalars.get(tag, {}).items():
            record = records.get(step + offset)
            if record is None:
                record = records[step + offset] = IterationRecord(iteration=step + offset, train_iters=train_iters,
                                                                  line_no=0)
            if field_name in INT_FIELDS:
                value = int(value) if math.isfinite(value) and float(value).is_integer() else None
            setattr(record, field_name, value)
    return {i: r for i, r in records.items() if i >= 1}


def _wall_clock_times(records: dict[int, IterationRecord], wall: dict[int, float], offset: int) -> int:
    """Step times from wall-clock differences between logged steps; returns how many were set."""
    steps = sorted(records)
    done = 0
    for previous, current in itertools.pairwise(steps):
        before, after = wall.get(previous - offset), wall.get(current - offset)
        if before is not None and after is not None and after > before:
            records[current].step_time_s = (after - before) / (current - previous)
            done += 1
    return done


def _memory(collector: _Collector) -> list[MemoryReport]:
    series = {name: collector.scalars.get(tag, {}) for tag, name in MEGATRON_MEMORY.items()}
    reports = []
    for step, allocated in sorted(series["allocated"].items()):
        peak = series["max_allocated"].get(step, allocated)
        reserved = series["reserved"].get(step)
        reports.append(MemoryReport(step, None, allocated / BYTES_PER_GIB, peak / BYTES_PER_GIB,
                                    None if reserved is None else reserved / BYTES_PER_GIB,
                                    (reserved if reserved is not None else peak) / BYTES_PER_GIB))
    return reports


def scan_events(paths: list[Path]) -> LogScan:
    """One run's scan from its event files (a run directory may hold several: restarts add files)."""
    scan = LogScan(kind="tensorboard", files=sorted(paths))
    collector = _Collector(scan)
    for path in scan.files:
        try:
            if path.stat().st_size == 0:
                scan.warn(f"{path.name}: empty file")
                continue
            for record in _records(path, scan):
                try:
                    event = event_pb2.Event.FromString(record)
                except DecodeError:
                    scan.warn(f"{path.name}: a record that is not a TensorBoard event: the rest is not read")
                    break
                if event.HasField("summary"):
                    collector.add(event)
        except OSError as exc:
            scan.warn(f"{path.name}: unreadable: {exc.strerror or exc}")
    if collector.events == 0:
        raise LogInputError("no TensorBoard summaries in the event file(s)" + (
            f" ({scan.warnings[0]})" if scan.warnings else ""))
    flavour = _flavour(collector.tags)
    records = _records_by_step(collector, flavour)
    offset = 0 if flavour == "megatron" else 1
    timing_tag = "iteration-time" if flavour == "megatron" else "train_step_timing in s"
    label = "megatron-lm tensorboard" if flavour == "megatron" else f"{NEMO_PREFIX}/lightning tensorboard"
    if timing_tag in collector.tags:
        scan.log_format = label
        scan.interval_is_average = flavour == "megatron"  # Megatron logs its interval average, Lightning one step
    else:
        set_count = _wall_clock_times(records, collector.wall, offset)
        scan.log_format = f"{label} (step times from event wall-clock differences)"
        scan.warn(f"the events have no {timing_tag!r} tag"
                  + (" (Megatron writes it only with --log-timers-to-tensorboard)" if flavour == "megatron" else "")
                  + f": {set_count} step time(s) are differences between consecutive logged steps' event "
                  "wall-clock times, the first logged step has none")
    timed = [records[i] for i in sorted(records) if records[i].step_time_s is not None]
    scan.iterations = [r for r in timed if step_time_problem(r.step_time_s) is None]  # utils/measure/plausible.py
    if len(scan.iterations) < len(timed):
        scan.warn(f"{len(timed) - len(scan.iterations)} step(s) with a step time no step can take (negative, not "
                  f"finite, under {STEP_TIME_FLOOR_S:g} s or over {MAX_STEP_TIME_S:g} s): dropped")
    scan.line_count = collector.events
    scan.memory = _memory(collector) if flavour == "megatron" else []
    scalars = sorted(t for t in collector.tags if not t.endswith(TEXT_SUFFIX))
    shown = ", ".join(scalars[:MAX_TAGS_SHOWN]) + (" ..." if len(scalars) > MAX_TAGS_SHOWN else "")
    scan.warn(f"scalar tags in the event file(s): {shown}; {len(scan.arguments)} argument(s) as text summaries")
    return scan
