"""Megatron's initialisation rule as two numbers, for every trainer, probe record and the fairness table.

Its own room because the fairness table, ``train/tran/init.py`` and the preflight all need it and the shared rooms
must not import a framework package. docs/CONFORMANCE.md names the versions checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class InitStds:
    """The two standard deviations of Megatron's rule."""

    std: float  # init_method_std: every other weight, embeddings, output layer
    scaled_std: float  # init_method_std / sqrt(2 * num_layers): attention output and MLP down projections


def megatron_init_stds(init_std: float, num_layers: int) -> InitStds:
    """Megatron's two stds for ``init_std`` and ``num_layers`` (a zero std is allowed, as config.env allows it)."""
    if not init_std >= 0 or num_layers < 1:  # `not >=` also refuses NaN
        raise ValueError(f"init_std {init_std} and num_layers {num_layers}: need init_std >= 0 and >= 1 layer")
    return InitStds(init_std, init_std / math.sqrt(2.0 * num_layers))
