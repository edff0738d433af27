"""The per-step record written while a run trains, so a killed run keeps what it measured.

Why: an in-process trainer writes its result when the run ends, and a SIGKILL of rank 0 (the OOM killer, a
scheduler's limit) leaves no chance to. So rank 0 also appends each step to ``<result stem>.steps.jsonl``, one line
flushed at once, after a header holding the result as it stood at the first step. When the trainer dies without a
result, ``train/launch/launcher.py`` turns the file into an ``incomplete`` one (:func:`recover_result`); a partly
written last line is ignored, and a previous run's file is removed before a job starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from utils.io.hashing import sha256_file
from utils.io.json_input import parse_json
from utils.measure.metrics import memory_metrics, peak_for, performance_metrics
from utils.measure.power import null_power_metrics
from utils.result.file import finalize_result, update_result
from utils.result.names import STEPS_SUFFIX
from utils.schema.measures import MemoryMetrics, PerformanceMetrics, SourceFile
from utils.schema.model import Result
from utils.spec.models import ModelShape

SUFFIX = STEPS_SUFFIX  # the name utils/result/names.py gives it (purge and wrap know it)
_FIELDS = ("time_s", "loss", "lr", "memory_allocated_gb")


def step_log_path(result_path: Path) -> Path:
    """``train_<...>.steps.jsonl`` beside ``train_<...>.json``."""
    result_path = Path(result_path)
    return result_path.with_name(result_path.stem + SUFFIX)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


class StepLog:
    """Append-only writer: the header on the first step, then one line per step."""

    def __init__(self, path: Path, result: Result, *, skip_steps: int, world_size: int) -> None:
        self.path = Path(path)
        self.result = result
        self.skip_steps = skip_steps
        self.world_size = world_size
        self._stream: IO[str] | None = None

    def append(self, step: int, time_s: float, loss: float | None, lr: float | None,
               memory_allocated_gb: float | None = None) -> None:
        """Record one finished step (1-based), flushed before returning."""
        if self._stream is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._stream = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - open for the whole run
            header = {"header": {"result": self.result.model_dump(mode="json"), "skip_steps": self.skip_steps,
                                 "world_size": self.world_size}}
            self._stream.write(json.dumps(header, allow_nan=False) + "\n")
        values = [time_s, loss, lr, memory_allocated_gb]
        line = {"step": step, **{name: _finite(value) for name, value in zip(_FIELDS, values, strict=True)}}
        self._stream.write(json.dumps(line, allow_nan=False) + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def read_step_log(path: Path) -> tuple[dict[str, Any], dict[str, list[float | None]]] | None:
    """(header, per-step arrays) of a step log; None when it has no usable header. Steps are read in order up to the
    first line that is not a complete record (a process killed mid-write leaves at most one such line, the last)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            lines = stream.read().split("\n")
    except OSError:
        return None
    try:  # a file on disk is input like any other: bounded in depth (utils/io/json_input.py)
        header = parse_json(lines[0], str(path))["header"]
        Result.model_validate(header["result"])
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None
    arrays: dict[str, list[float | None]] = {"step_times": [], "loss_values": [], "learning_rates": [],
                                             "memory_allocated_gb": []}
    for number, text in enumerate(lines[1:], start=1):
        try:
            record = parse_json(text, str(path))
            if record["step"] != number or not isinstance(record["time_s"], (int, float)) or record["time_s"] < 0:
                break
        except (ValueError, KeyError, TypeError):
            break
        for name, field in zip(arrays, _FIELDS, strict=True):
            arrays[name].append(record.get(field))
    return header, arrays


def recover_result(path: Path, reason: str) -> Result | None:
    """An ``incomplete`` result built from a step log (every step it holds, summary blocks computed). ``reason`` says
    why the trainer wrote no result (its exit); None when the file has no header."""

    read = read_step_log(path)
    if read is None:
        return None
    header, arrays = read
    result = Result.model_validate(header["result"])
    shape = ModelShape(**result.model_shape.model_dump())
    record_steps(result, arrays, skip_steps=int(header["skip_steps"]), shape=shape,
                 world_size=int(header["world_size"]),
                 memory_reason="recovered from the step record: peak memory was not recorded")
    source = result.source.model_copy(update={"files": [*result.source.files,
                                                        SourceFile(path=str(path), sha256=sha256_file(path))]})
    update_result(result, source=source, warnings=[
        *result.warnings, f"recovered from {Path(path).name}: the trainer ended without writing its result"])
    result.power_metrics = null_power_metrics("the run ended before its energy could be read",
                                              result.training_config.num_gpus)
    return finalize_result(result, "incomplete", reason)


def record_steps(
    result: Result,
    arrays: Mapping[str, Sequence[float | None]],
    *,
    skip_steps: int,
    shape: ModelShape,
    world_size: int | None = None,
    memory: MemoryMetrics | None = None,
    peak_allocated_gb: float | None = None,
    peak_reserved_gb: float | None = None,
    memory_reason: str | None = None,
) -> PerformanceMetrics:
    """Put per-step arrays into ``result`` with the performance and memory blocks computed from them. GBS, SL and the
    world size come from ``training_config``, the peak from ``gpu_info`` at the precision it ran; ``memory`` replaces
    the allocator summary when the caller has a richer one. Returns the new performance block."""
    config = result.training_config
    peak, precision, reason = peak_for(result.gpu_info, bool(config.workload.FP8))
    steps = {name: list(arrays.get(name, ())) for name in ("step_times", "loss_values", "learning_rates",
                                                           "memory_allocated_gb")}
    performance = performance_metrics(
        steps["step_times"], skip_steps=skip_steps, global_batch_size=config.global_batch_size,
        seq_len=config.sequence_length, world_size=world_size or config.num_gpus, shape=shape,
        peak_tflops=peak, peak_reason=reason, peak_precision=precision,
    )
    if memory is None:
        memory = memory_metrics(steps["memory_allocated_gb"], peak_allocated_gb=peak_allocated_gb,
                                peak_reserved_gb=peak_reserved_gb, total_memory_gb=result.gpu_info.total_memory_gb,
                                reason=memory_reason)
    update_result(result, **steps, performance_metrics=performance, memory_metrics=memory)
    return performance
