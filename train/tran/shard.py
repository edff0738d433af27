"""tran's data-parallel wrapping: FSDP2 per decoder layer and root, torch.compile per layer, and what ran, read back.

DDP replicates fp32 weights, gradients and AdamW states on every rank, which no 80 GB GPU holds for an 8B model.
One ``fully_shard`` per decoder layer plus the root, as torchtitan does; the settings shown are read back from the
built model (:func:`read_back`), never copied from the config.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (``model.model.layers``)."""
    return list(model.model.layers)


def compile_layers(model: torch.nn.Module) -> int:
    """``torch.compile`` each decoder layer in place (before sharding, as torchtitan does); returns how many."""
    layers = decoder_layers(model)
    for layer in layers:
        layer.compile()
    return len(layers)


def shard(model: torch.nn.Module, precision: str) -> torch.nn.Module:
    """``fully_shard`` each decoder layer, then the root, with bf16 (PRECISION) compute and fp32 reduction."""
    policy = MixedPrecisionPolicy(param_dtype=DTYPES[precision], reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def read_back(model: torch.nn.Module) -> dict[str, Any]:
    """What the built model shards and casts: the fully_shard modules' policies and the parameters' placements."""
    modules = [m for m in model.modules() if isinstance(m, FSDPModule)]
    policies = set()
    for module in modules:
        group = module._get_fsdp_state()._fsdp_param_group  # the policy fully_shard resolved for this module
        if group is not None:
            policies.add((group.mp_policy.param_dtype, group.mp_policy.reduce_dtype))
    params = list(model.parameters())
    sharded = [p for p in params if isinstance(p, DTensor)]
    ranks = {p.device_mesh.size() for p in sharded}
    masters = {p.dtype for p in params}
    settings: dict[str, Any] = {
        "sharding": "FSDP2 (fully_shard)" if modules else "none",
        "fully_shard_modules": len(modules),
        "sharded_parameters": f"{len(sharded)} of {len(params)}",
        "shard_ranks": ranks.pop() if len(ranks) == 1 else None,
        "master_dtype": DTYPE_NAMES.get(masters.pop()) if len(masters) == 1 else None,
    }
    if len(policies) == 1:
        param_dtype, reduce_dtype = policies.pop()
        settings["param_dtype"] = DTYPE_NAMES.get(param_dtype) if param_dtype else settings["master_dtype"]
        settings["grad_reduce_dtype"] = DTYPE_NAMES.get(reduce_dtype) if reduce_dtype else settings["param_dtype"]
    else:
        settings["param_dtype"] = settings["grad_reduce_dtype"] = None
    settings["grad_reduce_in_fp32"] = settings["grad_reduce_dtype"] == "fp32"
    return settings


def timed(device: torch.device, work: Any) -> float:
    """Seconds ``work()`` takes with the device synchronised at both ends."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    work()
    sync()
    return time.perf_counter() - start
