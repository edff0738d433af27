"""Time to quality: held-out evaluations -> the result's ``quality`` block.

The one place that turns evaluations (and the launcher's energy trace) into time, samples, tokens, energy and
GPU-hours to a target loss, so every framework is judged by the same arithmetic. A target is reached at or below
``TARGET_LOSS`` (MLPerf's rule; Lightning's ``EarlyStopping`` is strict, so no stack's own early stop decides it);
the figures are the first such evaluation's, wall seconds counted from the first step's start with evaluation time
included (as MLPerf counts from run_start); energy comes from the launcher's trace (:func:`with_energy`); a
non-finite eval loss is null with its reason and ends the run (:func:`stop_reason`). Which held-out samples a
stack's evaluations read is its :class:`HeldOutSet`: MLPerf's measure is :data:`FIXED_SET`, the same first
EVAL_SAMPLES validation sequences every time; a stack whose pinned code cannot do that says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from utils.config.model import Config
from utils.schema.quality import TO_TARGET_FIELDS, Evaluation, Quality, first_at_target

# How tran and deep reduce the eval loss (train/tran/evaluation.py): every stack's value is stated in these words.
PER_TOKEN_MEAN = "per-token mean over all evaluated tokens (sum of token cross-entropy / token count, all ranks)"
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class HeldOutSet:
    """Which held-out samples a stack's evaluations read: ``fixed`` (the same ones every time: MLPerf's measure) or
    not, and the one line the dry run, the result and the MLLOG say it in."""

    fixed: bool
    words: str


FIXED_SET = HeldOutSet(True, "MLPerf's measure: one fixed held-out set, every evaluation reads the same first "
                             "EVAL_SAMPLES sequences of the validation set")

# (start_unix, end_unix) -> (energy in kWh over that span for the job's GPUs, or None with why)
EnergyBetween = Callable[[float, float], tuple[float | None, str | None]]

NOT_REACHED = "the target loss was not reached"
NO_TARGET = "no TARGET_LOSS set"


def non_finite_reason(loss: float) -> str | None:
    """Why ``loss`` cannot be recorded as a number (None: it can)."""
    return None if math.isfinite(loss) else f"eval loss was {loss!r} (not finite): recorded as null"


def make_evaluation(cfg: Config, *, step: int, loss: float, seconds: float, eval_seconds: float | None,
                    unix_s: float | None = None) -> Evaluation:
    """One evaluation after training step ``step`` (1-based); a NaN or infinite loss is null with its reason."""
    why = non_finite_reason(loss)
    samples = step * cfg.gbs
    return Evaluation(step=step, samples=samples, tokens=samples * cfg.sl, seconds=max(seconds, 0.0),
                      loss=None if why else float(loss), loss_reason=why,
                      eval_seconds=None if eval_seconds is None else max(eval_seconds, 0.0), unix_s=unix_s)


def stop_reason(cfg: Config, evaluation: Evaluation) -> str | None:
    """Why the run ends after ``evaluation`` (None: it goes on): a non-finite loss, or the target reached."""
    if evaluation.loss is None:
        return f"eval loss at step {evaluation.step} is not finite ({evaluation.loss_reason}): stopped"
    if cfg.stop_at_target and cfg.target_loss is not None and evaluation.loss <= cfg.target_loss:
        return (f"eval loss {evaluation.loss:.6g} at step {evaluation.step} is at or below TARGET_LOSS="
                f"{cfg.target_loss:g}: stopped at target")
    return None


def build_quality(cfg: Config, evaluations: Sequence[Evaluation], *, reduction: str, held_out: HeldOutSet,
                  platform: str, gpus: int, run_start_unix: float | None = None, stop: str | None = None,
                  energy: EnergyBetween | None = None, energy_reason: str | None = None) -> Quality:
    """The ``quality`` block of a run with evaluation on. ``held_out``: which samples the stack's evaluations read;
    ``gpus``: the GPUs the job held (the world size); ``stop``: :func:`stop_reason` of the evaluation the run ended
    after, if it ended early; ``energy``: the energy between two wall-clock times (the launcher's trace), else
    ``energy_reason`` says why there is none."""
    if not cfg.evaluates:
        raise ValueError("build_quality: evaluation is off (EVAL_INTERVAL and EVAL_SAMPLES are 0)")
    block = Quality.model_construct(  # validated once, with its figures to target, by _to_target
        eval_samples=cfg.eval_samples, eval_interval_samples=cfg.eval_interval,
        eval_interval_steps=cfg.eval_interval_steps, reduction=reduction, fixed_set=held_out.fixed,
        measure=held_out.words, target_loss=cfg.target_loss,
        stop_at_target=cfg.stop_at_target, run_start_unix=run_start_unix, evaluations=list(evaluations),
        stop_reason=stop)
    return _to_target(block, platform=platform, gpus=gpus, energy=energy, energy_reason=energy_reason)


def with_energy(quality: Quality, *, platform: str, gpus: int, energy: EnergyBetween | None,
                energy_reason: str | None) -> Quality:
    """``quality`` with its figures to target recomputed, energy from ``energy`` (the launcher's trace)."""
    return _to_target(quality, platform=platform, gpus=gpus, energy=energy, energy_reason=energy_reason)


def _to_target(block: Quality, *, platform: str, gpus: int, energy: EnergyBetween | None,
               energy_reason: str | None) -> Quality:
    first = first_at_target(block)
    base = {name: getattr(block, name) for name in Quality.model_fields
            if name not in (*TO_TARGET_FIELDS, "reached", "stopped_at_target", "null_reasons")}
    if first is None:
        reasons = {name: NO_TARGET if block.target_loss is None else NOT_REACHED for name in TO_TARGET_FIELDS}
        return Quality.model_validate({**base, "null_reasons": reasons})
    reasons: dict[str, str] = {}
    gpu_hours = None
    if platform == "cpu":
        reasons["gpu_hours_to_target"] = "cpu platform: no GPU"
    else:
        gpu_hours = first.seconds * gpus / SECONDS_PER_HOUR
    kwh, why = None, energy_reason or "no energy trace"
    if energy is not None and block.run_start_unix is not None and first.unix_s is not None:
        kwh, why = energy(block.run_start_unix, first.unix_s)
    elif energy is not None:
        why = "the evaluation's or the run's wall-clock time is unknown: energy to target not computed"
    if kwh is None:
        reasons["energy_to_target_kwh"] = why or "energy not measured"
    # the run ended early after the first evaluation at the target: it stopped there (STOP_AT_TARGET)
    stopped = block.stop_at_target and block.stop_reason is not None and block.evaluations[-1] is first
    values = {"time_to_target_s": first.seconds, "samples_to_target": first.samples,
              "tokens_to_target": first.tokens, "energy_to_target_kwh": kwh, "gpu_hours_to_target": gpu_hours}
    # one validated construction: the invariants between the fields hold together
    return Quality.model_validate({**base, **values, "reached": True, "stopped_at_target": stopped,
                                   "null_reasons": reasons})


def evaluation_note(cfg: Config) -> str:
    """The dry run's line on evaluation: off, or its cadence, size, target and stop (issue 34)."""
    if not cfg.evaluates:
        return "evaluation: off (EVAL_INTERVAL=0, EVAL_SAMPLES=0): a throughput run"
    target = "no TARGET_LOSS" if cfg.target_loss is None else (
        f"TARGET_LOSS={cfg.target_loss:g}, " + ("stop at the first evaluation at or below it" if cfg.stop_at_target
                                                 else "no stop (STOP_AT_TARGET=false)"))
    return (f"evaluation: every {cfg.eval_interval} samples ({cfg.eval_interval_steps} steps) on {cfg.eval_samples} "
            f"held-out sequences ({cfg.eval_iters} global batches of the validation set), {target}")


def held_out_notes(cfg: Config, held_out: HeldOutSet) -> list[str]:
    """A stack's dry-run line on which held-out samples its evaluations read ([] when evaluation is off)."""
    return [f"evaluation: {held_out.words}"] if cfg.evaluates else []


def interval_warning(cfg: Config) -> str | None:
    """One line when EVAL_INTERVAL is beyond the run: no evaluation would ever run (None: it fits)."""
    if cfg.evaluates and cfg.eval_interval_steps > cfg.train_iters:
        return (f"EVAL_INTERVAL={cfg.eval_interval} samples ({cfg.eval_interval_steps} steps) is larger than the run "
                f"(TRAIN_ITERS={cfg.train_iters} steps): no evaluation will run")
    return None
