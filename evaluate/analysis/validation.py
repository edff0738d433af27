"""Validating result files (``python -m evaluate.validate``): the schema, the sanity of the numbers, fairness.

Per result, errors fail the validation and warnings are shown (the model's refusal, the gate's reasons, throughput and
MFU recomputed, finite decreasing losses, a tuned run's recipe); across the results: :mod:`evaluate.analysis.fairness`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluate.analysis.fairness import FairnessReport, check_fairness, recipe_problems
from evaluate.analysis.results import LoadedDirectory, find_result_files, load_results
from train.settings.expected import contradictions
from utils.io.sanitise import one_line
from utils.result.admit import refusals
from utils.schema.measures import PerformanceMetrics
from utils.schema.model import Result
from utils.schema.quality import first_at_target

THROUGHPUT_TOLERANCE = 0.01
DEFAULT_MIN_STEPS = 5


@dataclass
class ResultCheck:
    """Outcome of the sanity checks of one result."""

    path: Path
    status: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "status": self.status, "valid": self.ok,
                "errors": self.errors, "warnings": self.warnings}


def _relative_gap(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else math.inf


def _check_throughput(result: Result, perf: PerformanceMetrics, errors: list[str]) -> None:
    workload = result.training_config.workload
    gbs, sl, gpus = workload.GBS, workload.SL, workload.WORLD_SIZE
    if gbs is None or sl is None or gpus is None:
        unknown = ", ".join(name for name, value in (("GBS", gbs), ("SL", sl), ("WORLD_SIZE", gpus)) if value is None)
        errors.append(f"throughput cannot be checked: {unknown} unknown")
        return
    if perf.tokens_per_step != gbs * sl:
        errors.append(f"tokens_per_step {perf.tokens_per_step} != GBS*SL = {gbs}*{sl} = {gbs * sl}")
    measured = [t for t in result.step_times[perf.skipped_steps:] if t is not None]
    tps = perf.tokens_per_second
    if not measured or tps is None:
        errors.append("no throughput: no measured step times or tokens_per_second is null")
        return
    median = statistics.median(measured)
    expected = gbs * sl / median if median > 0 else math.inf
    gap = _relative_gap(tps, expected)
    if gap > THROUGHPUT_TOLERANCE:
        errors.append(f"tokens_per_second {tps:,.1f} disagrees with GBS*SL/median step time {expected:,.1f} "
                      f"({gap:.1%} > {THROUGHPUT_TOLERANCE:.0%})")
    per_gpu = perf.tokens_per_second_per_gpu
    if per_gpu is None or _relative_gap(per_gpu * gpus, tps) > THROUGHPUT_TOLERANCE:
        errors.append(f"tokens_per_second_per_gpu {per_gpu} x {gpus} GPUs does not give tokens_per_second {tps:,.1f}")
    recorded = perf.median_step_time_seconds
    if recorded is not None and _relative_gap(recorded, median) > THROUGHPUT_TOLERANCE:
        errors.append(f"median_step_time_seconds {recorded:.6g} disagrees with the step_times array ({median:.6g})")


def _check_losses(result: Result, errors: list[str], warnings: list[str]) -> None:
    losses = result.loss_values
    if not losses:
        errors.append("no loss values recorded")
        return
    missing = [i + result.first_step for i, v in enumerate(losses) if v is None]
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        errors.append(f"{len(missing)} non-finite loss value(s) at step(s) {shown}")
    finite = [v for v in losses if v is not None]
    if len(finite) < 6:
        warnings.append(f"only {len(finite)} finite losses: too few to judge whether loss decreases")
        return
    third = len(finite) // 3
    first, last = statistics.fmean(finite[:third]), statistics.fmean(finite[-third:])
    if not last < first:
        errors.append(f"loss not decreasing on average: first third mean {first:.4f}, last third mean {last:.4f}")


def _check_quality(result: Result, errors: list[str], warnings: list[str]) -> None:
    """The ``quality`` block's schedule (the schema holds its nulls to reasons and its target to the first evaluation
    at it; ``utils/measure/plausible.py`` its times and sizes to the run)."""
    quality = result.quality
    if quality is None:
        return
    gbs = result.training_config.global_batch_size
    if gbs and quality.eval_interval_samples != quality.eval_interval_steps * gbs:
        errors.append(f"quality: eval_interval_samples {quality.eval_interval_samples} is not eval_interval_steps "
                      f"{quality.eval_interval_steps} x GBS {gbs}")
    previous = None
    for evaluation in quality.evaluations:
        where = f"quality: evaluation at step {evaluation.step}"
        if evaluation.step % quality.eval_interval_steps:
            errors.append(f"{where} is not a multiple of the interval of {quality.eval_interval_steps} steps")
        if previous is not None and (evaluation.seconds < previous.seconds or evaluation.samples <= previous.samples):
            errors.append(f"{where}: time or samples do not increase after step {previous.step}")
        if evaluation.loss is None:
            warnings.append(f"{where}: eval loss null ({evaluation.loss_reason})")
        previous = evaluation
    first = first_at_target(quality)
    if quality.stopped_at_target and (not quality.evaluations or quality.evaluations[-1] is not first):
        errors.append("quality: stopped at the target, but the last evaluation is not the one at the target")
    if quality.target_loss is not None and not quality.reached:
        warnings.append(f"quality: the target loss {quality.target_loss:g} was not reached in "
                        f"{len(quality.evaluations)} evaluation(s)")


def _check_profile(result: Result, errors: list[str], warnings: list[str]) -> None:
    block = result.profile_settings
    if result.profile == "tuned":
        problems, _ = recipe_problems(result)
        errors.extend(f"tuned run {problem}" for problem in problems)
    elif block is not None and block.fallback:
        warnings.append(f"PROFILE=tuned was requested but the identical profile ran: {block.fallback}")


def check_result(result: Result, path: Path, min_steps: int = DEFAULT_MIN_STEPS) -> ResultCheck:
    """Sanity checks of one schema-valid result (the schema already refused non-finite and negative figures)."""
    check = ResultCheck(path, result.status)
    errors, warnings = check.errors, check.warnings
    if result.status != "ok":
        errors.append(f"status {result.status}: {one_line(result.error, 400)}")
    warnings.extend(f"recorded warning: {one_line(w, 400)}" for w in result.warnings)
    perf = result.performance_metrics
    if perf is None:
        errors.append("no performance_metrics")
    else:
        if perf.measured_steps < min_steps:
            errors.append(f"only {perf.measured_steps} measured steps (need at least {min_steps})")
        _check_throughput(result, perf, errors)
        if perf.mfu is None:
            warnings.append(f"MFU not computed: {perf.mfu_reason}")
        else:
            for convention, value in perf.mfu.model_dump().items():
                if value is not None and value > 1.0:
                    errors.append(f"MFU ({convention}) {value:.1%} exceeds 100%: FLOPs, peak or step time is wrong")
        reported = perf.framework_reported
        for disagreement in reported.disagreements if reported is not None else []:
            if disagreement.flagged:
                warnings.append(f"framework's own {disagreement.metric} differs from ours by "
                                f"{disagreement.relative_gap:.1%} (over the {disagreement.tolerance:.0%} tolerance)")
    errors.extend(f"implausible: {problem}" for problem in refusals(result, path))  # why the gate refuses it
    _check_losses(result, errors, warnings)
    _check_quality(result, errors, warnings)
    _check_profile(result, errors, warnings)
    if result.effective_settings is not None:
        workload = result.training_config.workload.model_dump(exclude={"unknown"})
        errors.extend(f"effective settings contradict the workload: {problem}"
                      for problem in contradictions(workload, result.effective_settings.settings))
    return check


@dataclass
class ValidationReport:
    checks: list[ResultCheck]
    invalid: list[tuple[Path, str]]
    fairness: FairnessReport
    unreadable: set[Path] = field(default_factory=set)  # of ``invalid``: not a readable regular file

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.invalid and all(c.ok for c in self.checks) and self.fairness.fair

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.ok,
            "results": [c.as_dict() for c in self.checks],
            "invalid_files": [{"path": str(p), "error": e} for p, e in self.invalid],
            "fairness": self.fairness.as_dict(),
        }


def guarded_check(result: Result, path: Path, min_steps: int = DEFAULT_MIN_STEPS) -> ResultCheck:
    """:func:`check_result`, with any failure of the checks themselves an error of this file only (a schema-valid
    file is still foreign input)."""
    try:
        return check_result(result, path, min_steps)
    except Exception as exc:  # one file's problem, never the whole validation's
        return ResultCheck(path, result.status, errors=[f"cannot be checked: {type(exc).__name__}: {one_line(exc)}"])


def validate_loaded(loaded: LoadedDirectory, min_steps: int = DEFAULT_MIN_STEPS) -> ValidationReport:
    checked = sorted(loaded.results + loaded.refused, key=lambda r: r.path)  # a refused result: each reason its line
    refused = {r.path for r in loaded.refused}
    return ValidationReport([guarded_check(r.result, r.path, min_steps) for r in checked],
                            [(path, why) for path, why in loaded.skipped if path not in refused],
                            check_fairness(loaded.results), loaded.unreadable)


def collect_paths(inputs: list[Path]) -> list[Path]:
    """Files as given, directories expanded to their ``train_*.json``."""
    paths: list[Path] = []
    for item in inputs:
        paths.extend(find_result_files(item) if item.is_dir() else [item])
    return paths


def validate_paths(inputs: list[Path], min_steps: int = DEFAULT_MIN_STEPS) -> ValidationReport:
    return validate_loaded(load_results(collect_paths(inputs)), min_steps)
