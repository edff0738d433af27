"""Megatron's initialisation rule as two numbers, for every trainer, probe record and the fairness table.

Why its own room: the fairness table (``train/settings/expected.py``) requires the scaled std
of every stack, ``tran`` and ``deep`` initialise their transformers models with it
(``train/tran/init.py``), and the shared rooms must not import a framework package
(``tests/unit/train/launch/test_plugin_contract.py``). Pure Python: the launcher imports it without torch.

megatron-core's ``TransformerConfig.__post_init__`` draws every weight from normal(0,
``init_method_std``) (``init_method_normal``) except the attention output and MLP down
projections, which get ``scaled_init_method_normal(init_method_std, num_layers)``: std
``init_method_std / sqrt(2 * num_layers)`` (a multiplier of 1 instead of 2 only for hybrid
Mamba models, which tprimat does not train). docs/CONFORMANCE.md names the versions checked.
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
