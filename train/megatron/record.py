"""Megatron-LM's validated ``args`` (a probe's ``raw`` answer) as one flat record with the fairness table's keys.

Used by ``mega`` and ``prim`` (whose args are Megatron's); see ``train/settings/flatten.py``.
"""

from __future__ import annotations

from typing import Any

from train.rules.cp_comm import effective_cp_comm_type
from train.settings.flatten import precision_of


def megatron_record(raw: dict[str, Any], padded_vocab: int | None,
                    lr_by_step: dict[str, float] | None = None,
                    transformer_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """Megatron-LM's validated ``args`` (``mega``, and ``prim``, whose args are Megatron's), with the scaled init
    std read back from the ``TransformerConfig`` its model provider builds (``train/settings/probe_common.py``)."""
    keys_as_is = (
        "seed", "micro_batch_size", "global_batch_size", "seq_length", "train_iters", "lr", "min_lr",
        "lr_decay_style", "lr_warmup_iters", "lr_decay_iters", "weight_decay", "adam_beta1", "adam_beta2",
        "adam_eps", "clip_grad", "init_method_std", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "context_parallel_size", "data_parallel_size", "sequence_parallel", "fp8", "use_distributed_optimizer",
        "overlap_grad_reduce", "overlap_param_gather", "ddp_average_in_collective", "num_layers", "hidden_size",
        "ffn_hidden_size", "num_attention_heads", "num_query_groups", "rotary_base", "norm_epsilon", "add_qkv_bias",
        "untie_embeddings_and_output_weights", "hidden_dropout", "attention_dropout", "normalization",
        "transformer_impl", "attention_backend", "bias_dropout_fusion", "masked_softmax_fusion", "apply_rope_fusion",
        "cross_entropy_loss_fusion", "gradient_accumulation_fusion", "attention_softmax_in_fp32",
        "fp32_residual_connection", "recompute_granularity", "tp_comm_overlap", "manual_gc",
        "calculate_per_token_loss", "dataloader_type", "num_workers", "eod_mask_loss", "reset_position_ids",
        "reset_attention_mask", "eval_iters", "eval_interval", "exit_signal_handler", "log_interval", "rerun_mode",
        "fp8_recipe", "fp8_amax_history_len",
        "fp8_amax_compute_algo", "fp8_param_gather",
        # what a tuned recipe (train/profiles/) may set besides the above; the last three are Primus's own
        "manual_gc_interval", "cross_entropy_fusion_impl", "ddp_bucket_size", "enable_primus_turbo",
        "use_turbo_attention", "use_turbo_grouped_mlp",
    )
    record = {key: raw[key] for key in keys_as_is if key in raw}
    record["precision"] = precision_of(raw)
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
    # An interval past the last step writes nothing during the run (Primus needs one, see train/prim/plugin.py).
    record["checkpoint_interval"] = interval if interval is not None and interval <= raw.get("train_iters", 0) else None
    record["checkpoint_at_end"] = bool(raw.get("save")) and not raw.get("disable_last_saving", False)
    if padded_vocab is not None:
        record["padded_vocab_size"] = padded_vocab
    record.update(lr_by_step or {})
    record["output_layer_init_method_std"] = init_std_read_back(transformer_config)
    # what the attention layers read: the built TransformerConfig's (args' where it could not be built)
    built = transformer_config if transformer_config and "_error" not in transformer_config else None
    if built is not None and "cp_comm_type" in built:
        record["cp_comm_type"] = effective_cp_comm_type(built["cp_comm_type"])
    elif "cp_comm_type" in raw:
        record["cp_comm_type"] = effective_cp_comm_type(raw["cp_comm_type"])
    return record


def init_std_read_back(transformer_config: dict[str, Any] | None) -> float | str:
    """The scaled std the probe read from Megatron's TransformerConfig, or why there is none (a difference)."""
    if not transformer_config:
        return "not read: the probe built no TransformerConfig"
    if "_error" in transformer_config:
        return f"not read: TransformerConfig not built ({transformer_config['_error']})"
    return transformer_config.get("output_layer_init_method_std", "not read: no output_layer_init_method")


def _split(raw: dict[str, Any]) -> str | None:
    """Megatron's split, or a separate train path (everything to training) as the same "100,0,0": Primus's, and
    mega's with evaluation, whose validation set is a file of its own (``--valid-data-path``)."""
    if raw.get("train_data_path") and not raw.get("test_data_path"):
        return "100,0,0"
    return raw.get("split")
