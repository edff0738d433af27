"""The learning-rate schedule every trainer runs and the fairness table expects: Megatron's, in plain Python.

Its own module so that the fairness table, the reference trainers and the tests import one definition without
importing torch or each other.
"""

from __future__ import annotations

import math

from utils.config.model import Config


def lr_at(step: int, cfg: Config) -> float:
    """LR after ``step`` completed optimizer steps: warm-up over WARMUP_STEPS, decay to MIN_LR at ``cfg.decay_iters``.
    Megatron's ``OptimizerParamScheduler.get_lr`` advances *after* each optimizer step, so its iteration ``k`` (1-based)
    trains with ``lr_at(k - 1)`` and logs ``lr_at(k)``."""
    if cfg.warmup_steps > 0 and step <= cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    if cfg.lr_decay == "constant" or cfg.decay_iters <= cfg.warmup_steps:
        return cfg.lr
    ratio = min(1.0, (step - cfg.warmup_steps) / (cfg.decay_iters - cfg.warmup_steps))
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio)) if cfg.lr_decay == "cosine" else 1.0 - ratio
    return cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)
