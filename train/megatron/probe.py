"""Probe: Megatron-LM's own ``parse_args`` + ``validate_args`` on tprimat's ``pretrain_gpt.py`` argv.

Runs inside the framework's Python (``python -m train.megatron.probe``, request
on stdin, see :mod:`train.settings.probe_common`), with the Megatron-LM tree first on
``sys.path``. It does what ``pretrain_gpt.py`` does before it builds the model:
``initialize_megatron`` parses the arguments and validates them with the
``args_defaults`` that ``pretrain_gpt.py`` passes, with ``WORLD_SIZE`` set as torchrun
sets it. Then it runs the language module's attention-backend check (the one that
stops model build when ``NVTE_*`` disagree with ``--attention-backend``) under the
launcher's environment, and tries to build the ``TransformerConfig`` as the model
provider would. Standard library and Megatron only.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from train.settings.probe_common import (
    attention_check,
    build_transformer_config,
    megatron_lr_by_step,
    namespace_values,
    run,
    set_environment,
    stand_in_device_arch,
)

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
    problem = attention_check(LanguageModule, args.attention_backend)
    if problem:
        raise AssertionError(problem)
    config = build_transformer_config(args)
    return {"raw": namespace_values(args), "lr_by_step": megatron_lr_by_step(args),
            "transformer_config": config.values,
            "padded_vocab_size": padded_vocab(args, request.get("tokenizer_size")),
            "stand_ins": arch_stand_ins + config.stand_ins,
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
