"""Megatron's initialisation for the transformers models that ``tran`` and ``deep`` build.

megatron-core's rule is :mod:`train.rules.init_std`'s. transformers uses one std for every Linear, so with 32 layers
its residual projections would start 8x larger than Megatron's and tran's loss curve would leave mega's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from train.rules.init_std import InitStds, megatron_init_stds

if TYPE_CHECKING:  # the launcher imports this file (the record's scaled std) and must not load torch
    import torch

# The transformers names (Llama, Qwen2, Mistral) of Megatron's linear_proj and linear_fc2.
SCALED_PROJECTIONS = ("o_proj", "down_proj")


def init_like_megatron(model: torch.nn.Module, init_std: float, num_layers: int) -> InitStds:
    """Re-initialise ``model`` in place by Megatron's rule (call it after seeding, before wrapping in DDP/DeepSpeed)."""
    import torch  # 4.8 s to import (python -X importtime); the launcher imports this file for the record's std

    stds = megatron_init_stds(init_std, num_layers)
    with torch.no_grad():
        _init(model, stds)
    return stds


def _init(model: torch.nn.Module, stds: InitStds) -> None:
    import torch  # as above: not at the launcher's start

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            scaled = name.rsplit(".", 1)[-1] in SCALED_PROJECTIONS
            module.weight.normal_(0.0, stds.scaled_std if scaled else stds.std)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, torch.nn.Embedding):
            module.weight.normal_(0.0, stds.std)
        elif isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith("RMSNorm"):
            module.weight.fill_(1.0)
            if getattr(module, "bias", None) is not None:
                module.bias.zero_()
