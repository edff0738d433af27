"""A log's held-out evaluations as the result's ``quality`` block, for tprimat launches and foreign logs.

The arithmetic is ``utils/measure/quality.py``'s; this module says where each number comes from. The wall time
comes from ``train/launch/target_watch.py``'s arrival record for a tprimat launch, else from the logged step times
plus the ``evaluate`` timer (a lower bound, said so; Megatron's ``elapsed time per iteration`` leaves evaluation
out, ``megatron/training/training.py:2359, 2389``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.logs.arguments import arg_int
from train.logs.patterns import EvaluationLine, IterationRecord
from utils.config.model import EvaluationCadence
from utils.measure.quality import FIXED_SET, HeldOutSet, build_quality, make_evaluation, stop_reason
from utils.schema.quality import Evaluation, Quality

MEGATRON_REDUCTION = (
    "per-token mean over all evaluated tokens: sum of masked token cross-entropy over every eval iteration, "
    "micro-batch and data-parallel rank / their unmasked token count, in float32 (Megatron-LM 847781764f "
    "evaluate(), megatron/training/training.py:2525-2599, with pretrain_gpt.py's loss_func l.59-118)")
NEMO_REDUCTION = (
    "mean over validation steps and micro-batches of the data-parallel mean of each micro-batch's per-token mean "
    "(NeMo 2.3 MaskedTokenLossReduction, nemo/lightning/megatron_parallel.py:1773-1838; Lightning's epoch mean): "
    "equal to the per-token mean over all evaluated tokens, since every micro-batch holds MBS x SL unmasked tokens "
    "(eod_mask_loss off, no pad id: docs/SAMPLE_ORDER.md)")
# A foreign Primus log that evaluated ran a Primus after v0.5.0 (train/prim/plugin.py); the log does not say which.
PRIMUS_REDUCTION = (
    "Megatron's evaluate() as Primus runs it: a per-token mean from Primus v26.2 (8c5bc42d) on; Primus v0.7.0's "
    "evaluator kept only the last eval iteration's mean (primus/backends/megatron/training/evaluator.py:112)")
REDUCTION = {"mega": MEGATRON_REDUCTION, "prim": PRIMUS_REDUCTION, "nemo": NEMO_REDUCTION}
# No pinned Megatron line offers a fixed set that works (docs/CONFORMANCE.md, tests/conformance/megatron_evaluate.py
# runs it); Primus evaluates through the same iterator.
MEGATRON_BLOCKS = HeldOutSet(False, (
    "not MLPerf's measure: evaluation k reads the k-th block of EVAL_SAMPLES validation sequences (Megatron-LM's "
    "iterator continues, training.py:2871 at 847781764f; --full-validation fails there for GBS > 1 and is absent at "
    "core_v0.12.0; fixed in core_v0.18.0)"))
# NeMo's validation sampler starts at 0 for every loader but training's (train/nemo/callback.py).
HELD_OUT = {"mega": MEGATRON_BLOCKS, "prim": MEGATRON_BLOCKS, "nemo": FIXED_SET}
# The launcher's record of a job's evaluation lines, beside its log (train/launch/target_watch.py writes it).
RECORD_SUFFIX = ".evaluations.jsonl"


def record_path(log_path: Path) -> Path:
    """Where the watcher records arrivals: beside the job's log (``<log>.evaluations.jsonl``)."""
    return log_path.with_name(log_path.name + RECORD_SUFFIX)


def read_record(log_path: Path) -> list[dict[str, Any]]:
    """The watcher's entries for a log, in arrival order ([] when none was written); broken lines skipped."""
    path = record_path(log_path)
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


@dataclass(frozen=True)
class LogEvaluationSettings(EvaluationCadence):
    """What ``utils/measure/quality.py`` reads of a ``Config``, as a log tprimat did not launch states it."""

    gbs: int
    sl: int
    eval_samples: int
    eval_interval: int  # samples
    target_loss: float | None = None
    stop_at_target: bool = False


def counted(evaluations: Sequence[EvaluationLine]) -> list[EvaluationLine]:
    """The in-loop evaluations of the first validation set, one per step (a repeated line kept once)."""
    seen: dict[int, EvaluationLine] = {}
    for line in evaluations:
        if line.in_loop and line.validation_set in (None, 0):
            seen.setdefault(line.iteration, line)
    return [seen[step] for step in sorted(seen)]


def arrival_times(record: Sequence[dict[str, Any]]) -> tuple[float | None, dict[int, float], str | None]:
    """(run start, evaluation step -> arrival, the stop's reason) from the launcher's record of a job."""
    first = next((e for e in record if e.get("kind") == "iteration"), None)
    start = None
    if first is not None and isinstance(first.get("unix_s"), (int, float)):
        start = float(first["unix_s"]) - float(first.get("step_time_s") or 0.0)
    arrivals = {int(e["iteration"]): float(e["unix_s"]) for e in record
                if e.get("kind") == "evaluation" and isinstance(e.get("unix_s"), (int, float))}
    stop = next((str(e["reason"]) for e in record if e.get("kind") == "stop" and not e.get("problem")), None)
    return start, arrivals, stop


def log_evaluations(settings: Any, lines: Sequence[EvaluationLine], iterations: Sequence[IterationRecord],
                    record: Sequence[dict[str, Any]] = ()) -> tuple[list[Evaluation], float | None, list[str]]:
    """(evaluations, run start in Unix time or None, notes): each counted evaluation with its step, loss and time.
    ``record``: the launcher's arrival record (``train/launch/target_watch.py: read_record``), empty for a log alone."""
    start, arrivals, _ = arrival_times(record)
    notes: list[str] = []
    step_times = {r.iteration: r.step_time_s for r in iterations if r.step_time_s is not None}
    evaluations: list[Evaluation] = []
    eval_so_far = 0.0
    timer_missing = 0
    for line in counted(lines):
        if line.eval_seconds is None:
            timer_missing += 1
        eval_so_far += line.eval_seconds or 0.0
        arrived = arrivals.get(line.iteration)
        if start is not None and arrived is not None:
            seconds, unix_s = arrived - start, arrived
        else:
            seconds, unix_s = sum(t for step, t in step_times.items() if step <= line.iteration) + eval_so_far, None
        evaluations.append(make_evaluation(settings, step=line.iteration, loss=line.loss, seconds=seconds,
                                           eval_seconds=line.eval_seconds, unix_s=unix_s))
    if evaluations and (start is None or any(e.unix_s is None for e in evaluations)):
        notes.append("evaluation times are the logged step times plus the logged evaluation times (no wall clock "
                     "of the lines' arrival): the time between the lines is not counted")
    if timer_missing:
        notes.append(f"{timer_missing} evaluation(s) without Megatron's evaluate timer line: their evaluation time "
                     "is not counted (a lower bound)")
    missing_steps = [e.step for e in evaluations if any(s not in step_times for s in range(1, e.step + 1))]
    if missing_steps and start is None:
        notes.append(f"the log lacks some step times before the evaluation at step {missing_steps[0]}: its time is "
                     "a lower bound")
    return evaluations, start, notes


def log_quality(settings: Any, lines: Sequence[EvaluationLine], iterations: Sequence[IterationRecord], *,
                framework: str, platform: str, gpus: int, record: Sequence[dict[str, Any]] = ()
                ) -> tuple[Quality | None, list[str]]:
    """The ``quality`` block of a Megatron, Primus or NeMo log (None when evaluation is off), and notes. For a log
    alone, the run ended after an evaluation when its loss is not finite and no later step was logged."""
    if not settings.evaluates:
        return None, []
    evaluations, start, notes = log_evaluations(settings, lines, iterations, record)
    _, _, stopped = arrival_times(record)
    stop = None
    last_step = max((r.iteration for r in iterations), default=0)
    if evaluations:
        last = evaluations[-1]
        reason = stop_reason(settings, last)
        ended_there = stopped is not None or (last.loss is None and last_step <= last.step + 1)
        stop = reason if ended_there else None
    energy_reason = ("the launcher's energy trace is applied after collection" if record else
                     "a log alone carries no energy trace")
    quality = build_quality(settings, evaluations, reduction=REDUCTION.get(framework, MEGATRON_REDUCTION),
                            held_out=HELD_OUT.get(framework, MEGATRON_BLOCKS), platform=platform, gpus=gpus,
                            run_start_unix=start, stop=stop, energy_reason=energy_reason)
    return quality, notes


def foreign_settings(arguments: dict[str, str], lines: Sequence[EvaluationLine], validation_steps: int | None,
                     gbs: int | None, sl: int | None) -> tuple[LogEvaluationSettings | None, list[str]]:
    """The evaluation settings a foreign log states: Megatron's ``eval_iters``/``eval_interval`` arguments, or
    NeMo's validation steps (``Validation: iteration i/n``) and the first evaluation's step; None (with a note) when
    it has evaluation lines but not enough to size them."""
    found = counted(lines)
    if not found:
        return None, []
    iters = arg_int(arguments, "eval_iters") or validation_steps
    interval = arg_int(arguments, "eval_interval") or found[0].iteration
    missing = [name for name, value in (("GBS", gbs), ("SL", sl), ("eval iterations", iters)) if not value]
    if missing:
        return None, [f"{len(found)} evaluation line(s) found, but the log states no {', '.join(missing)}: "
                      "no quality block"]
    assert gbs is not None and sl is not None and iters is not None
    return LogEvaluationSettings(gbs=gbs, sl=sl, eval_samples=iters * gbs, eval_interval=interval * gbs), []
