"""Probe: NeMo 2's recipe with tprimat's overrides, built and connected as ``llm.pretrain`` does, read back.

Runs inside the NeMo Python (``python -m train.nemo.probe``, request on stdin, :mod:`train.settings.probe_common`):
the connect step matters because the precision plugin overwrites the model, optimizer and DDP configs. Only
change: ``accelerator="cpu"``, so Lightning builds the trainer without a GPU; no network is built.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

from train.settings.probe_common import (
    attention_check,
    have_transformer_engine,
    lr_steps,
    namespace_values,
    plain,
    run,
    scaled_init_std,
    set_environment,
    stand_in_fused_rope,
)


def config_values(config: Any) -> dict[str, Any]:
    """A (Megatron/NeMo) dataclass config as JSON scalars."""
    if dataclasses.is_dataclass(config):
        return {f.name: plain(getattr(config, f.name, None)) for f in dataclasses.fields(config)}
    return namespace_values(config)


def data_values(data: Any) -> dict[str, Any]:
    keys = ("seq_length", "micro_batch_size", "global_batch_size", "num_workers", "pin_memory", "persistent_workers",
            "reset_position_ids", "reset_attention_mask", "create_attention_mask", "eod_mask_loss", "seed", "split",
            "index_mapping_dir", "num_dataset_builder_threads")
    values = {key: plain(getattr(data, key, None)) for key in keys}
    sampler = getattr(data, "data_sampler", None)
    values["dataloader_type"] = plain(getattr(sampler, "dataloader_type", None))
    return values


def trainer_values(trainer: Any, recipe_trainer: Any) -> dict[str, Any]:
    keys = ("max_steps", "log_every_n_steps", "val_check_interval", "limit_val_batches", "limit_test_batches",
            "num_sanity_val_steps", "accumulate_grad_batches", "enable_checkpointing", "num_nodes", "devices",
            "use_distributed_sampler", "gradient_clip_val")
    values = {key: plain(getattr(recipe_trainer, key, None)) for key in keys}
    values["callbacks"] = [type(cb).__name__ for cb in trainer.callbacks]
    # NeMo's GarbageCollectionCallback holds the manual GC interval (a tuned recipe's, train/profiles/nvd.py)
    values["gc_interval_train"] = next((plain(cb.gc_interval_train) for cb in trainer.callbacks
                                        if type(cb).__name__ == "GarbageCollectionCallback"), None)
    values["checkpoint_callbacks"] = [type(cb).__name__ for cb in trainer.checkpoint_callbacks]
    return values


def nemo_lr_by_step(scheduler: Any, model: Any, lr: float, steps: int) -> dict[str, float]:
    """The LR NeMo's own scheduler gives optimizer steps 1, 2 and the last (step ``k`` uses the rate after ``k - 1``
    scheduler steps), over a one-parameter SGD at the configured LR."""
    # the framework's own code: importable only in its Python, where the probe runs
    import torch

    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    torch_scheduler = scheduler.scheduler(model, optimizer)["lr_scheduler"]["scheduler"]
    rates = {1: optimizer.param_groups[0]["lr"]}
    for step in range(2, steps + 1):
        optimizer.step()
        torch_scheduler.step()
        rates[step] = optimizer.param_groups[0]["lr"]
    return lr_steps(rates, steps)


def probe(request: dict[str, Any]) -> dict[str, Any]:
    set_environment(request.get("env", {}))
    os.environ["WORLD_SIZE"] = str(request["world_size"])
    # the framework's own code, in its Python only; after set_environment, which it reads
    import fiddle as fdl
    from megatron.core.models.common.language_module.language_module import LanguageModule

    from train.nemo.entry import build_recipe
    from train.nemo.recipe import NemoOverrides

    with open(request["overrides"], encoding="utf-8") as handle:
        overrides = NemoOverrides.from_dict(json.load(handle))
    stand_ins = stand_in_fused_rope()
    recipe = build_recipe(overrides)
    configured_mask = getattr(recipe.data, "create_attention_mask", False)
    recipe.trainer.accelerator = "cpu"
    pretrain = fdl.build(recipe)
    model, data, trainer = (pretrain.keywords[k] for k in ("model", "data", "trainer"))
    optim, log, resume = (pretrain.keywords.get(k) for k in ("optim", "log", "resume"))
    if optim is not None:
        optim.connect(model)  # llm.api._setup
    strategy = trainer.strategy
    strategy.connect(model)  # trainer.fit -> Trainer._run -> strategy.connect
    problem = attention_check(LanguageModule, model.config.attention_backend)
    if problem:
        raise AssertionError(problem)
    plugin = strategy.precision_plugin
    scheduler = getattr(optim, "lr_scheduler", None)
    lr_by_step = nemo_lr_by_step(scheduler, model, float(model.optim.config.lr), int(recipe.trainer.max_steps))
    # the framework's own code: importable only in its Python, where the probe runs
    import nemo

    return {
        "raw": {
            # the scaled init std read back from the connected GPTConfig (a megatron-core TransformerConfig)
            "model": {**config_values(model.config), "output_layer_init_method_std": scaled_init_std(model.config)},
            "optimizer": config_values(model.optim.config) if getattr(model, "optim", None) else {},
            "scheduler": namespace_values(scheduler) if scheduler is not None else {},
            "scheduler_class": type(scheduler).__name__ if scheduler is not None else None,
            "ddp": config_values(strategy.ddp_config) if dataclasses.is_dataclass(strategy.ddp_config)
            else {"_value": plain(strategy.ddp_config)},
            "strategy": {key: plain(getattr(strategy, key, None)) for key in (
                "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                "sequence_parallel", "virtual_pipeline_model_parallel_size", "ckpt_async_save", "ckpt_load_optimizer",
                "ckpt_save_optimizer", "save_ckpt_format")},
            "parallelism": config_values(strategy.parallelism),
            "precision_plugin": {"class": type(plugin).__name__, "precision": plain(getattr(plugin, "precision", None)),
                                 **config_values(getattr(plugin, "dtype_config", None) or {})},
            "data": data_values(data),
            "trainer": trainer_values(trainer, recipe.trainer),
            "log": {"ckpt": plain(getattr(log, "ckpt", None)), "tensorboard": plain(getattr(log, "tensorboard", None)),
                    "wandb": plain(getattr(log, "wandb", None))},
            "resume": plain(resume),
            "world_size": int(request["world_size"]),
        },
        "stand_ins": stand_ins,
        "lr_by_step": lr_by_step,
        "have_transformer_engine": have_transformer_engine(),
        "configured": {"create_attention_mask": plain(configured_mask)},
        "framework": {"nemo": getattr(nemo, "__version__", None)},
    }


if __name__ == "__main__":
    sys.exit(run(probe))
