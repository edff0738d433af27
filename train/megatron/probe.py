"""Probe: Megatron-LM's own ``parse_args`` + ``validate_args`` on tprimat's ``pretrain_gpt.py`` argv.

Runs inside the framework's Python (:mod:`train.settings.probe_common`) what ``pretrain_gpt.py`` does before
building the model, then the attention-backend check under the launcher's environment and the ``TransformerConfig``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from train.settings.probe_common import megatron_record, run, set_environment, stand_in_device_arch

# What pretrain_gpt.py passes to pretrain() as args_defaults (docs/CONFORMANCE.md).
PRETRAIN_GPT_ARGS_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}


def megatron_version() -> str | None:
    try:
        # the framework's own code: importable only in its Python, where the probe runs
        from megatron.core import package_info
    except ImportError:
        return None
    return getattr(package_info, "__version__", None)


def probe(request: dict[str, Any]) -> dict[str, Any]:
    tree = request["tree"]
    sys.path.insert(0, tree)
    set_environment(request.get("env", {}))
    os.environ["WORLD_SIZE"] = str(request["world_size"])
    os.environ["RANK"] = "0"
    # the framework's own code: importable only in its Python, where the probe runs (after set_environment)
    from megatron.core.models.common.language_module.language_module import LanguageModule
    from megatron.training.arguments import parse_args, validate_args

    arch_stand_ins = stand_in_device_arch(int(request.get("device_arch", 9)))
    sys.argv = ["pretrain_gpt.py", *request["argv"]]
    args = parse_args()
    validate_args(args, dict(PRETRAIN_GPT_ARGS_DEFAULTS))
    record = megatron_record(args, LanguageModule, arch_stand_ins)
    return {**record, "padded_vocab_size": padded_vocab(args, request.get("tokenizer_size")),
            "framework": {"megatron_core": megatron_version(), "tree": tree}}


def padded_vocab(args: Any, tokenizer_size: int | None) -> int | None:
    """Megatron's own padding of the tokenizer's size (what its tokenizer builder sets)."""
    if tokenizer_size is None:
        return None
    # the framework's own code: importable only in its Python, where the probe runs
    from megatron.training.tokenizer.tokenizer import _vocab_size_with_padding

    return int(_vocab_size_with_padding(int(tokenizer_size), args, logging_enabled=False))


if __name__ == "__main__":
    sys.exit(run(probe))
