"""Probe: Primus's own experiment loading, its Megatron argument updates and the validation it runs.

Runs inside the framework's Python (:mod:`train.settings.probe_common`) from the Primus root, in the order its
trainer runs them. Standard library, Primus and Megatron only.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version as dist_version
from typing import Any

from train.settings.probe_common import megatron_record, run, set_environment, stand_in_device_arch


def primus_version(root: str) -> str | None:
    try:
        # the framework's own code: importable only in its Python, where the probe runs
        import primus
    except ImportError:
        return None
    version = getattr(primus, "__version__", None)
    if version:
        return str(version)
    try:
        return dist_version("primus")
    except Exception:  # not an installed distribution: the tree's commit says it
        return None


def probe(request: dict[str, Any]) -> dict[str, Any]:
    root, backend = request["primus"], request["backend"]
    sys.path[:0] = [root, backend]
    os.chdir(root)
    set_environment(request.get("env", {}))
    os.environ["WORLD_SIZE"] = str(request["world_size"])
    os.environ["RANK"] = "0"
    os.environ["LOCAL_RANK"] = "0"
    # the framework's own code: importable only in its Python, where the probe runs (after set_environment)
    from megatron.core.models.common.language_module.language_module import LanguageModule
    from megatron.training.arguments import validate_args
    from primus.core.launcher.parser import load_primus_config
    from primus.modules.base_module import BaseModule
    from primus.modules.trainer.megatron.pre_trainer import MegatronPretrainTrainer
    from primus.modules.trainer.megatron.utils import validate_args_on_rocm

    arch_stand_ins = stand_in_device_arch(int(request.get("device_arch", 9)))
    cli = argparse.Namespace(config=request["exp"], data_path=request["data_path"], backend_path=None,
                             export_config=None)
    primus_cfg, unknown = load_primus_config(cli, [])
    if unknown:
        raise ValueError(f"Primus does not know the override keys {sorted(unknown)}")
    # primus/pretrain.py's trainer as rank 0, without MegatronTrainer's own __init__: it only monkey-patches model
    # classes, which needs Transformer Engine and changes no argument (docs/CONFORMANCE.md).
    trainer = MegatronPretrainTrainer.__new__(MegatronPretrainTrainer)
    BaseModule.__init__(trainer, module_name="pre_trainer", primus_config=primus_cfg, module_rank=0,
                        module_world_size=int(request["world_size"]),
                        module_master_addr=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                        module_master_port=int(os.environ.get("MASTER_PORT", "29500")))
    args = trainer.module_config
    # ... and trainer.init() starts with these updates, then initialize_megatron():
    trainer.update_primus_config(args=args, exp_root_path=trainer.exp_root_path,
                                 exp_meta_info=trainer.exp_meta_info)
    # MegatronTrainer.init() -> initialize_megatron(args_defaults={}) -> validate_args(args, {})
    validate_args(args, {})
    validate_args_on_rocm(args)
    record = megatron_record(args, LanguageModule, arch_stand_ins)  # the fused-RoPE stand-in, as the mega probe
    size = request.get("tokenizer_size")
    # Primus builds its tokenizer itself and pads with the trainer's own rule.
    padded = MegatronPretrainTrainer.vocab_size_with_padding(trainer, int(size), args) if size else None
    return {**record, "padded_vocab_size": padded,
            "framework": {"primus": primus_version(root), "tree": root, "backend": backend}}


if __name__ == "__main__":
    sys.exit(run(probe))
