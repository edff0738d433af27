"""NeMo's connected recipe (a probe's ``raw`` answer) as one flat record with the fairness table's keys.

See ``train/settings/flatten.py``.
"""

from __future__ import annotations

from typing import Any

from train.rules.cp_comm import effective_cp_comm_type
from train.settings.flatten import precision_of

NEMO_SCHEDULERS = {
    "CosineAnnealingScheduler": "cosine",
    "WarmupAnnealingScheduler": "linear",
    "WarmupPolicyScheduler": "constant",
}


def nemo_record(raw: dict[str, Any], lr_by_step: dict[str, float] | None = None) -> dict[str, Any]:
    """NeMo's connected model config, optimizer, scheduler, DDP config, strategy, data module and trainer."""
    model, optim, sched = raw["model"], raw["optimizer"], raw["scheduler"]
    ddp, strategy, data, trainer = raw["ddp"], raw["strategy"], raw["data"], raw["trainer"]
    record: dict[str, Any] = {
        "seed": data.get("seed"),
        "micro_batch_size": data.get("micro_batch_size"),
        "global_batch_size": data.get("global_batch_size"),
        "seq_length": model.get("seq_length"),
        "train_iters": trainer.get("max_steps"),
        "lr": optim.get("lr"),
        "min_lr": sched.get("min_lr"),
        "lr_decay_style": NEMO_SCHEDULERS.get(raw.get("scheduler_class") or "", raw.get("scheduler_class")),
        "lr_warmup_iters": sched.get("warmup_steps"),
        # NeMo v2.3.0's MegatronStrategy.setup copies the trainer's max_steps into the scheduler whatever the recipe
        # set (nemo/lightning/pytorch/strategies/megatron_strategy.py:437): the decay ends at the trainer's max_steps
        "lr_decay_iters": trainer.get("max_steps") if trainer.get("max_steps") is not None else sched.get("max_steps"),
        "weight_decay": optim.get("weight_decay"),
        "adam_beta1": optim.get("adam_beta1"),
        "adam_beta2": optim.get("adam_beta2"),
        "adam_eps": optim.get("adam_eps"),
        "clip_grad": optim.get("clip_grad"),
        "init_method_std": model.get("init_method_std"),
        "output_layer_init_method_std": model.get("output_layer_init_method_std",
                                                  "not read: the probe reported no output_layer_init_method"),
        "tensor_model_parallel_size": strategy.get("tensor_model_parallel_size"),
        "pipeline_model_parallel_size": strategy.get("pipeline_model_parallel_size"),
        "context_parallel_size": strategy.get("context_parallel_size"),
        "sequence_parallel": strategy.get("sequence_parallel"),
        "precision": precision_of(model),
        "fp8": model.get("fp8"),
        "grad_reduce_in_fp32": ddp.get("grad_reduce_in_fp32"),
        "use_distributed_optimizer": ddp.get("use_distributed_optimizer"),
        "overlap_grad_reduce": ddp.get("overlap_grad_reduce"),
        "overlap_param_gather": ddp.get("overlap_param_gather"),
        "check_for_nan_in_grad": ddp.get("check_for_nan_in_grad"),
        "ddp_average_in_collective": ddp.get("average_in_collective"),
        "num_layers": model.get("num_layers"),
        "hidden_size": model.get("hidden_size"),
        "ffn_hidden_size": model.get("ffn_hidden_size"),
        "num_attention_heads": model.get("num_attention_heads"),
        "num_query_groups": model.get("num_query_groups"),
        "padded_vocab_size": model.get("vocab_size"),
        "rotary_base": float(model["rotary_base"]) if model.get("rotary_base") is not None else None,
        "rope_scaling_factor": float(model["scale_factor"]) if model.get("scale_factor") is not None else None,
        "norm_epsilon": model.get("layernorm_epsilon"),
        "add_qkv_bias": model.get("add_qkv_bias"),
        "untie_embeddings_and_output_weights": not model.get("share_embeddings_and_output_weights"),
        "hidden_dropout": model.get("hidden_dropout"),
        "attention_dropout": model.get("attention_dropout"),
        "normalization": model.get("normalization"),
        "attention_backend": model.get("attention_backend"),
        "dataloader_type": data.get("dataloader_type"),
        "num_workers": data.get("num_workers"),
        "persistent_workers": data.get("persistent_workers"),
        "create_attention_mask": data.get("create_attention_mask"),
        "eod_mask_loss": data.get("eod_mask_loss"),
        "reset_position_ids": data.get("reset_position_ids"),
        "reset_attention_mask": data.get("reset_attention_mask"),
        "data_split": data.get("split"),
        "checkpoint_interval": None if not trainer.get("checkpoint_callbacks") else "every checkpoint callback",
        "checkpoint_at_end": bool(trainer.get("checkpoint_callbacks")) or raw["log"].get("ckpt") is not None,
        "eval_iters": 0 if trainer.get("limit_val_batches") in (0, 0.0) else trainer.get("limit_val_batches"),
        "eval_interval": trainer.get("val_check_interval"),  # Megatron's eval_interval: steps between evaluations
        "log_interval": trainer.get("log_every_n_steps"),
        "rerun_mode": None,
    }
    for key in ("bias_activation_fusion", "bias_dropout_fusion", "masked_softmax_fusion", "persist_layer_norm",
                "apply_rope_fusion", "cross_entropy_loss_fusion", "gradient_accumulation_fusion",
                "attention_softmax_in_fp32", "fp32_residual_connection", "recompute_granularity", "tp_comm_overlap",
                "calculate_per_token_loss"):
        record[key] = model.get(key)
    if "cp_comm_type" in model:  # the connected GPTConfig's, as Megatron's TE layer reads it
        record["cp_comm_type"] = effective_cp_comm_type(model["cp_comm_type"])
    record["manual_gc"] = "GarbageCollectionCallback" in (trainer.get("callbacks") or [])
    record["manual_gc_interval"] = trainer.get("gc_interval_train")
    record["cross_entropy_fusion_impl"] = model.get("cross_entropy_fusion_impl")
    record["ddp_bucket_size"] = ddp.get("bucket_size")
    for key in ("fp8_recipe", "fp8_amax_history_len", "fp8_amax_compute_algo"):
        record[key] = model.get(key)
    record["fp8_param_gather"] = ddp.get("fp8_param_gather")
    tp, pp, cp = (record[k] or 1 for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                           "context_parallel_size"))
    world = raw.get("world_size")
    record["data_parallel_size"] = world // (tp * pp * cp) if isinstance(world, int) else None
    record.update(lr_by_step or {})
    return record
