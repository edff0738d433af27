"""Time to quality (issue 34): the held-out evaluations of a run and the time, samples, tokens, energy and
GPU-hours to a target loss (``utils/measure/quality.py: build_quality`` produces them)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from utils.schema.block import MAX_FIGURE, Block, Count, Figure, NonNegative, Positive
from utils.schema.limits import MAX_STEPS

# The figures "to target" a quality block holds; each is null with its reason in ``null_reasons``.
TO_TARGET_FIELDS = ("time_to_target_s", "samples_to_target", "tokens_to_target", "energy_to_target_kwh",
                    "gpu_hours_to_target")


class Evaluation(Block):
    """One held-out evaluation, after training step ``step`` (1-based).

    ``seconds`` is the wall time from the first training step's start (MLPerf's run_start) to this evaluation's end,
    evaluation time included; ``unix_s`` is that end on the host's wall clock (``Quality.run_start_unix`` is the
    origin), so a later reader (an MLPerf log, issue 35) can place it. A NaN or infinite loss is recorded as ``None``
    with ``loss_reason``.
    """

    step: Positive
    samples: Count
    tokens: Count
    seconds: NonNegative
    loss: Figure | None
    loss_reason: str | None = None
    eval_seconds: NonNegative | None = None
    unix_s: NonNegative | None = None
    NULL_REASONS: ClassVar = {"loss": "loss_reason"}



class Quality(Block):
    """Held-out evaluations and the time, samples, tokens, energy and GPU-hours to a target loss.

    Produced only by ``utils/measure/quality.py: build_quality`` (``None`` on a result when evaluation is off).
    ``reached``: an evaluation's loss is at or below ``target_loss``; the figures to target are those of the first
    such evaluation. ``stopped_at_target``: the run ended there (STOP_AT_TARGET), which is an ``ok`` ending.
    ``stop_reason`` says why the run ended before TRAIN_ITERS (target reached, a NaN eval loss). ``reduction`` says how
    this stack reduces the eval loss (docs/ARCHITECTURE.md, issue 34: the per-token mean over all evaluated tokens).
    ``fixed_set``: every evaluation read the same first ``eval_samples`` validation sequences, MLPerf's measure (issue
    50); False: each read the next block; None: not recorded (a result written before issue 50). ``measure`` says it.
    """

    eval_samples: Positive
    eval_interval_samples: Positive
    eval_interval_steps: Positive
    reduction: str
    fixed_set: bool | None = None
    measure: str | None = None
    target_loss: Annotated[float, Field(gt=0, le=MAX_FIGURE)] | None = None
    stop_at_target: bool = True
    run_start_unix: NonNegative | None = None
    evaluations: list[Evaluation] = Field(default_factory=list, max_length=MAX_STEPS)  # at most one per step
    reached: bool = False
    stopped_at_target: bool = False
    stop_reason: str | None = None
    time_to_target_s: NonNegative | None = None
    samples_to_target: Count | None = None
    tokens_to_target: Count | None = None
    energy_to_target_kwh: NonNegative | None = None
    gpu_hours_to_target: NonNegative | None = None
    null_reasons: dict[str, str] = Field(default_factory=dict)
    NULL_REASONS: ClassVar = dict.fromkeys(TO_TARGET_FIELDS, "null_reasons")

    @model_validator(mode="after")
    def _consistent(self) -> Quality:
        for before, after in zip(self.evaluations, self.evaluations[1:], strict=False):
            if after.step <= before.step or after.samples < before.samples or after.seconds < before.seconds:
                raise ValueError(f"quality.evaluations: step {after.step} does not follow step {before.step} with "
                                 "more steps, samples and seconds")
        if self.stopped_at_target and not self.reached:
            raise ValueError("quality: stopped_at_target without reaching the target")
        if self.reached:
            first = first_at_target(self)
            if first is None:
                raise ValueError(f"quality: reached, but no evaluation's loss is at or below the target "
                                 f"{self.target_loss}")
            if self.samples_to_target is not None and self.samples_to_target != first.samples:
                raise ValueError(f"quality: samples_to_target={self.samples_to_target} but the first evaluation at "
                                 f"the target is at {first.samples} samples")
            if self.tokens_to_target is not None and self.tokens_to_target != first.tokens:
                raise ValueError(f"quality: tokens_to_target={self.tokens_to_target} but the first evaluation at "
                                 f"the target is at {first.tokens} tokens")
            if self.time_to_target_s is not None and self.time_to_target_s != first.seconds:
                raise ValueError(f"quality: time_to_target_s={self.time_to_target_s} but the first evaluation at the "
                                 f"target ended at {first.seconds} s")
        else:
            if first_at_target(self) is not None:
                raise ValueError(f"quality: not reached, but an evaluation's loss is at or below the target "
                                 f"{self.target_loss}")
            if any(getattr(self, name) is not None for name in TO_TARGET_FIELDS):
                raise ValueError("quality: figures to target without the target reached")
        return self


def first_at_target(quality: Quality) -> Evaluation | None:
    """The first evaluation whose loss is at or below the target (None: none, or no target)."""
    if quality.target_loss is None:
        return None
    return next((e for e in quality.evaluations if e.loss is not None and e.loss <= quality.target_loss), None)
