"""One run's facts from its MLLOG events: what it trained with, its evaluations, its start, stop and status.

The start and stop are the summarizer's (:func:`start_stop`, held equal to ``_query_run_start_stop`` by its test);
a fact that cannot be true refuses the run, in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from evaluate.mlperf.reader import Event, Log
from utils.io.sanitise import one_line

MAX_SETTINGS = 400
MAX_TEXT = 300
MAX_COUNT = 10**15  # samples: far beyond any run (the v5.1 runs train under 10**6 samples)


@dataclass(frozen=True)
class Eval:
    """One ``eval_accuracy``: samples (its ``samples_count``), the loss, its time and the evaluation's length (ms)."""

    samples: int
    loss: float | None
    time_ms: float
    eval_ms: float | None


@dataclass
class RunFacts:
    benchmark: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    start_ms: float | None = None
    stop_ms: float | None = None
    stop_status: str | None = None
    evaluations: list[Eval] = field(default_factory=list)
    converged_samples: int | None = None  # the RCP checker's samples to converge (None: not converged)
    problems: list[str] = field(default_factory=list)
    failed_lines: list[tuple[str, str]] = field(default_factory=list)
    lines: int = 0
    records: int = 0

    def setting(self, key: str) -> Any:
        return self.settings.get(key)

    def number(self, key: str) -> float | None:
        value = self.settings.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def count(self, key: str) -> int | None:
        """A setting that must be a whole positive number (``1.0`` as NVIDIA logs it is 1), else None."""
        value = self.number(key)
        return int(value) if value is not None and value.is_integer() and 0 < value <= MAX_COUNT else None


def _scalar(value: Any) -> tuple[bool, Any]:
    if isinstance(value, str):
        return True, one_line(value, MAX_TEXT)
    if value is None or isinstance(value, bool | int):
        return (True, value) if not isinstance(value, int) or abs(value) <= MAX_COUNT else (False, None)
    if isinstance(value, float):
        return (math.isfinite(value) and abs(value) <= 1e18), value
    return False, None


def _samples(event_meta: dict[str, Any]) -> int | None:
    value = event_meta.get("samples_count")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
            and float(value).is_integer() and 0 <= value <= MAX_COUNT:
        return int(value)
    return None


def start_stop(events: list[Event]) -> tuple[float, float]:
    """The summarizer's start and stop: read until both are seen, each the last of its key so far; ValueError."""
    start = stop = None
    for event in events:
        if event.key == "run_start":
            start = event.timestamp
        elif event.key == "run_stop":
            stop = event.timestamp
        if start is not None and stop is not None:
            return start, stop
    raise ValueError("run_start not recorded" if start is None else "run_stop not recorded")


def run_facts(log: Log) -> RunFacts:
    """The facts of one log; ``problems`` says why it cannot become a result (empty: it can)."""
    facts = RunFacts(failed_lines=log.failed, lines=log.lines,
                     records=len(log.events) + len(log.lazy) + len(log.failed))
    events = log.events
    try:
        facts.start_ms, facts.stop_ms = start_stop(events)
    except ValueError as exc:
        facts.start_ms = next((e.timestamp for e in events if e.key == "run_start"), None)
        if facts.start_ms is None:
            facts.problems.append(f"{exc} (no run_start: not a run's log, or cut before it started)")
    for event in events:
        if event.key == "submission_benchmark" and facts.benchmark is None:
            facts.benchmark = one_line(event.value, 60) if isinstance(event.value, str) else None
        if event.key == "run_start":
            break
        if event.key not in facts.settings and len(facts.settings) < MAX_SETTINGS:
            ok, value = _scalar(event.value)
            if not ok and event.value is not None and not isinstance(event.value, dict | list):
                facts.problems.append(f"{event.key} is {one_line(event.value, 40)}: not a finite figure")
            elif ok:
                facts.settings[one_line(event.key, 80)] = value
    _read_run(facts, events)
    if facts.start_ms is not None and facts.stop_ms is not None and facts.stop_ms < facts.start_ms:
        facts.problems.append(f"run_stop is {(facts.start_ms - facts.stop_ms) / 1000:.3f} s before run_start: "
                              "a negative time to train")
    return facts


def _read_run(facts: RunFacts, events: list[Event]) -> None:
    """Evaluations up to the stop, the stop's status, the samples to converge (the RCP checker's rule)."""
    started = stop_seen = False
    eval_start: float | None = None
    last_samples: int | None = None
    for event in events:
        if event.key == "run_start":
            started = True
        elif event.key == "run_stop" and not stop_seen:
            stop_seen = True
            status = event.meta.get("status")
            facts.stop_status = one_line(status, 40) if isinstance(status, str) else None
            facts.converged_samples = last_samples if facts.stop_status == "success" else None
        elif not started or stop_seen:
            continue
        elif event.key == "eval_start":
            eval_start = event.timestamp
        elif event.key == "eval_accuracy":
            samples = _samples(event.meta)
            loss = event.value if isinstance(event.value, int | float) and not isinstance(event.value, bool) else None
            if samples is None:
                facts.problems.append("an eval_accuracy without a whole samples_count")
                return
            if loss is not None and not math.isfinite(loss):
                loss = None
            took = event.timestamp - eval_start if eval_start is not None else None
            facts.evaluations.append(Eval(samples, loss, event.timestamp, took))
            eval_start, last_samples = None, samples
    for before, after in zip(facts.evaluations, facts.evaluations[1:], strict=False):
        if after.samples <= before.samples or after.time_ms < before.time_ms:
            facts.problems.append(f"evaluations go back: {after.samples} samples after {before.samples}")
            return
