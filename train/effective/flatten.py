"""Each framework's resolved values (a probe's ``raw`` answer) as one flat record with the fairness table's keys.

The probes report what the framework holds, in its own names (Megatron's ``args``,
NeMo's model/optimizer/DDP/data objects). Here, in tprimat's process, those names are
mapped onto :func:`train.effective.expected.expected_settings`'s keys. Nothing is
defaulted: a value the framework did not report stays out of the record, and the
preflight then names it as not resolved.
"""

from __future__ import annotations

from typing import Any

NEMO_SCHEDULERS = {
    "CosineAnnealingScheduler": "cosine",
    "WarmupAnnealingScheduler": "linear",
    "WarmupPolicyScheduler": "constant",
}


def _precision(values: dict[str, Any]) -> str:
    if values.get("bf16"):
        return "bf16"
    if values.get("fp16"):
        return "fp16"
    return "fp32"


def megatron_record(raw: dict[str, Any], padded_vocab: int | None,
                    lr_by_step: dict[str, float] | None = None) -> dict[str, Any]:
    """Megatron-LM's validated ``args`` (``mega``, and ``prim``, whose args are Megatron's)."""
    keys_as_is = (
        "seed", "micro_batch_size", "global_batch_size", "seq_length", "train_iters", "lr", "min_lr",
        "lr_decay_style", "lr_warmup_iters", "lr_decay_iters", "weight_decay", "adam_beta1", "adam_beta2",
        "adam_eps", "clip_grad", "init_method_std", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "context_parallel_size", "data_parallel_size", "sequence_parallel", "fp8", "use_distributed_optimizer",
        "overlap_grad_reduce", "overlap_param_gather", "ddp_average_in_collective", "num_layers", "hidden_size",
        "ffn_hidden_size", "num_attention_heads", "num_query_groups", "rotary_base", "norm_epsilon", "add_qkv_bias",
        "untie_embeddings_and_output_weights", "hidden_dropout", "attention_dropout", "normalization",
        "attention_backend", "bias_dropout_fusion", "masked_softmax_fusion", "apply_rope_fusion",
        "cross_entropy_loss_fusion", "gradient_accumulation_fusion", "attention_softmax_in_fp32",
        "fp32_residual_connection", "recompute_granularity", "tp_comm_overlap", "manual_gc",
        "calculate_per_token_loss", "dataloader_type", "num_workers", "eod_mask_loss", "reset_position_ids",
        "reset_attention_mask", "eval_iters", "log_interval", "rerun_mode", "fp8_recipe", "fp8_amax_history_len",
        "fp8_amax_compute_algo", "fp8_param_gather",
        # what a tuned recipe (train/profiles/) may set besides the above; the last three are Primus's own
        "manual_gc_interval", "cross_entropy_fusion_impl", "ddp_bucket_size", "enable_primus_turbo",
        "use_turbo_attention", "use_turbo_grouped_mlp",
    )
    record = {key: raw[key] for key in keys_as_is if key in raw}
    record["precision"] = _precision(raw)
    record["grad_reduce_in_fp32"] = raw.get("accumulate_allreduce_grads_in_fp32")
    record["check_for_nan_in_grad"] = raw.get("check_for_nan_in_loss_and_grad")
    # Megatron's MLP activation fusion is bias_swiglu_fusion for SwiGLU models (bias_gelu_fusion otherwise).
    record["bias_activation_fusion"] = raw.get("bias_swiglu_fusion") if raw.get("swiglu") else raw.get(
        "bias_gelu_fusion")
    if "no_persist_layer_norm" in raw:
        record["persist_layer_norm"] = not raw["no_persist_layer_norm"]
    if "num_workers" in raw:
        # Megatron's data loader (megatron/legacy/data/data_samplers.py) keeps workers alive whenever it has any.
        record["persistent_workers"] = raw["num_workers"] > 0
    if "create_attention_mask_in_dataloader" in raw:
        record["create_attention_mask"] = raw["create_attention_mask_in_dataloader"]
    record["rope_scaling_factor"] = float(raw["rope_scaling_factor"]) if raw.get("use_rope_scaling") else None
    if isinstance(record.get("rotary_base"), int):
        record["rotary_base"] = float(record["rotary_base"])
    record["data_split"] = _split(raw)
    interval = raw.get("save_interval") if raw.get("save") else None
    # An interval past the last step writes nothing during the run (Primus needs one, see train/train_prim.py).
    record["checkpoint_interval"] = interval if interval is not None and interval <= raw.get("train_iters", 0) else None
    record["checkpoint_at_end"] = bool(raw.get("save")) and not raw.get("disable_last_saving", False)
    if padded_vocab is not None:
        record["padded_vocab_size"] = padded_vocab
    record.update(lr_by_step or {})
    return record


def _split(raw: dict[str, Any]) -> str | None:
    """Megatron's split, or Primus's separate train path (everything to training) as the same "100,0,0"."""
    if raw.get("train_data_path") and not raw.get("valid_data_path") and not raw.get("test_data_path"):
        return "100,0,0"
    return raw.get("split")


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
        "lr_decay_iters": sched.get("max_steps"),
        "weight_decay": optim.get("weight_decay"),
        "adam_beta1": optim.get("adam_beta1"),
        "adam_beta2": optim.get("adam_beta2"),
        "adam_eps": optim.get("adam_eps"),
        "clip_grad": optim.get("clip_grad"),
        "init_method_std": model.get("init_method_std"),
        "tensor_model_parallel_size": strategy.get("tensor_model_parallel_size"),
        "pipeline_model_parallel_size": strategy.get("pipeline_model_parallel_size"),
        "context_parallel_size": strategy.get("context_parallel_size"),
        "sequence_parallel": strategy.get("sequence_parallel"),
        "precision": _precision(model),
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
        "log_interval": trainer.get("log_every_n_steps"),
        "rerun_mode": None,
    }
    for key in ("bias_activation_fusion", "bias_dropout_fusion", "masked_softmax_fusion", "persist_layer_norm",
                "apply_rope_fusion", "cross_entropy_loss_fusion", "gradient_accumulation_fusion",
                "attention_softmax_in_fp32", "fp32_residual_connection", "recompute_granularity", "tp_comm_overlap",
                "calculate_per_token_loss"):
        record[key] = model.get(key)
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
