"""The fairness table as data: the effective value every vendor stack must run, per setting.

Why here and nowhere else: the launchers (``train/megatron/args.py``,
``train/nemo/recipe.py``, ``train/prim/plugin.py``) take the settings that are not
``config.env`` keys from :data:`FIXED`, and the preflight compares what each framework
*resolved* with :func:`expected_settings`. One table feeds both, so a framework that
silently changes a value (Megatron's bf16 gradient-reduce rule, a NeMo precision plugin,
a Primus default) is caught, and the table cannot disagree with what was asked for.

Keys are tprimat's flat names (mostly Megatron's argument names); docs/CONFORMANCE.md
explains each one and where each framework reads it.
"""

from __future__ import annotations

from typing import Any

from train.rules.init_std import megatron_init_stds
from train.rules.schedule import lr_at
from utils.config.load import Config
from utils.spec.models import ModelShape

# Settings that are not config.env keys, fixed identically for mega, prim and nemo.
FIXED: dict[str, Any] = {
    # model regularisation: Llama and Qwen train without dropout
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "normalization": "RMSNorm",
    # gradients: distributed optimizer, no overlap, reduced in the training dtype, NaN check on
    "use_distributed_optimizer": True,
    "overlap_grad_reduce": False,
    "overlap_param_gather": False,
    "check_for_nan_in_grad": True,
    "ddp_average_in_collective": False,
    # fusions: the fairness table turns every one on, on both vendors
    "bias_activation_fusion": True,
    "bias_dropout_fusion": True,
    "masked_softmax_fusion": True,
    "persist_layer_norm": True,
    "apply_rope_fusion": True,
    "cross_entropy_loss_fusion": True,
    "attention_softmax_in_fp32": True,
    "fp32_residual_connection": False,
    # memory and communication tricks off: the same work on every stack
    "recompute_granularity": None,
    "tp_comm_overlap": False,
    # context parallelism by point-to-point exchange on every stack (NeMo's Mistral says a2a: train/rules/cp_comm.py)
    "cp_comm_type": "p2p",
    "manual_gc": False,
    "calculate_per_token_loss": False,
    # data loader: Megatron's sequential sampler, same worker count, no materialised attention mask
    # (causal masking happens inside the attention kernel on every stack)
    "dataloader_type": "single",
    "num_workers": 2,
    "persistent_workers": True,
    "create_attention_mask": False,
    "eod_mask_loss": False,
    "reset_position_ids": False,
    "reset_attention_mask": False,
    "data_split": "100,0,0",
    # no checkpoints, one log line per step, no re-runs of suspicious steps (evaluation: EVAL_SAMPLES, below)
    "checkpoint_interval": None,
    "checkpoint_at_end": False,
    "log_interval": 1,
    "rerun_mode": "disabled",
}

# Under FP8=true only: Megatron's delayed-scaling "hybrid" recipe as NVIDIA's and AMD's examples run it,
# with bf16 parameter gathering (NeMo's bf16_with_fp8_mixed plugin gathers FP8 parameters unless told not to).
FP8_FIXED: dict[str, Any] = {
    "fp8_recipe": "delayed",
    "fp8_amax_history_len": 1024,
    "fp8_amax_compute_algo": "max",
    "fp8_param_gather": False,
}

# Per platform: the attention kernel and the fused weight-gradient accumulation (a CUDA/apex kernel).
ATTENTION_BACKEND = {"nvd": "fused", "amd": "auto"}
GRADIENT_ACCUMULATION_FUSION = {"nvd": True, "amd": False}

# MEGATRON_IMPL (mega and prim, whose layers are Megatron's): the images' Transformer Engine layers, or Megatron's
# own local ones for a machine without Transformer Engine and apex. local changes what Megatron-LM at MEGATRON_REF
# (checked at 847781764f) refuses or cannot run without them:
# - apply_rope_fusion: TransformerConfig.__post_init__ raises "apply_rope_fusion is not available" without TE;
# - masked_softmax_fusion: FusedScaleMaskSoftmax imports the scaled_*_masked_softmax_cuda kernels (apex);
# - gradient_accumulation_fusion: ColumnParallelLinear raises without apex's fused_weight_gradient_mlp_cuda;
# - persist_layer_norm: the local RMSNorm (WrappedTorchNorm) asserts it is off;
# - attention_backend auto: flash/fused/unfused name Transformer Engine's kernels, which local attention never calls.
# The other fusions (bias-SwiGLU, bias-dropout, cross-entropy) are Megatron's own jit code and stay on.
MEGATRON_IMPL_FRAMEWORKS = ("mega", "prim")
LOCAL_IMPL: dict[str, Any] = {
    "attention_backend": "auto",
    "apply_rope_fusion": False,
    "masked_softmax_fusion": False,
    "gradient_accumulation_fusion": False,
    "persist_layer_norm": False,
}


def implementation_settings(megatron_impl: str) -> dict[str, Any]:
    """What MEGATRON_IMPL decides for a Megatron framework: its ``transformer_impl`` and, for local, LOCAL_IMPL."""
    return {"transformer_impl": megatron_impl, **(LOCAL_IMPL if megatron_impl == "local" else {})}


# Keys a framework has no such setting for (compared only where the framework has them);
# the reason is what the record and docs/CONFORMANCE.md say.
INHERENT: dict[str, dict[str, str]] = {
    "nemo": {
        "lr_step_1": "NeMo's warm-up gives step k the rate LR*k/(W+1); Megatron's LR*(k-1)/W",
        "lr_step_2": "NeMo's warm-up gives step k the rate LR*k/(W+1); Megatron's LR*(k-1)/W",
        "rerun_mode": "NeMo's Lightning loop has no Megatron rerun state machine",
        "log_interval": "NeMo logs through Lightning (trainer.log_every_n_steps), read as log_interval",
        "eval_iters": "NeMo validates through Lightning (trainer.limit_val_batches), read as eval_iters",
    },
}



def lr_by_step(cfg: Config) -> dict[str, float]:
    """Optimizer step ``k`` (1-based) trains at ``lr_at(k - 1)`` in Megatron and in tran (train/rules/schedule.py)."""
    return {"lr_step_1": lr_at(0, cfg), "lr_step_2": lr_at(min(1, cfg.train_iters - 1), cfg),
            "lr_step_last": lr_at(cfg.train_iters - 1, cfg)}


def expected_settings(cfg: Config, platform: str, shape: ModelShape, padded_vocab: int) -> dict[str, Any]:
    """Every setting's required effective value for one vendor job (``padded_vocab``: Megatron's padded size)."""
    if platform not in ATTENTION_BACKEND:
        raise ValueError(f"platform {platform!r}: the vendor stacks run on {', '.join(ATTENTION_BACKEND)}")
    rope_factor = float(shape.rope_scaling["factor"]) if shape.rope_scaling else None
    return {
        # training algorithm (config.env)
        "seed": cfg.seed,
        "micro_batch_size": cfg.mbs,
        "global_batch_size": cfg.gbs,
        "seq_length": cfg.sl,
        "train_iters": cfg.train_iters,
        "lr": cfg.lr,
        "min_lr": cfg.min_lr,
        "lr_decay_style": cfg.lr_decay,
        "lr_warmup_iters": cfg.warmup_steps,
        "lr_decay_iters": cfg.decay_iters,
        "weight_decay": cfg.weight_decay,
        "adam_beta1": cfg.beta1,
        "adam_beta2": cfg.beta2,
        "clip_grad": cfg.grad_clip,
        # ADAM_EPS: Megatron-LM's and PyTorch's 1e-8 by default (NeMo's recipes use 1e-5, MLPerf's rules too)
        "adam_eps": cfg.adam_eps,
        "init_method_std": cfg.init_std,
        # held-out evaluation (issue 34): global batches per evaluation, 0 when off (config.env's default)
        "eval_iters": cfg.eval_iters,
        # Megatron's scaled std of the attention output and MLP down projections (train/rules/init_std.py), read back
        # from each stack's own TransformerConfig by its probe, and used by tran and deep (train/tran/init.py)
        "output_layer_init_method_std": megatron_init_stds(cfg.init_std, shape.num_layers).scaled_std,
        # the rate optimizer steps 1, 2 and the last train with (Megatron's schedule, which tran reproduces)
        **lr_by_step(cfg),
        # layout and precision (config.env)
        "tensor_model_parallel_size": cfg.tp,
        "pipeline_model_parallel_size": cfg.pp,
        "context_parallel_size": cfg.cp,
        "data_parallel_size": cfg.dp,
        "sequence_parallel": cfg.tp > 1,
        "precision": cfg.precision,
        "fp8": "hybrid" if cfg.fp8 else None,
        # the fairness table: gradients reduced in the training dtype, i.e. never forced up to fp32
        # (under PRECISION=fp32 the training dtype already is fp32)
        "grad_reduce_in_fp32": False,
        # architecture (utils/spec/models.py)
        "num_layers": shape.num_layers,
        "hidden_size": shape.hidden_size,
        "ffn_hidden_size": shape.ffn_hidden_size,
        "num_attention_heads": shape.num_attention_heads,
        "num_query_groups": shape.num_query_groups,
        "padded_vocab_size": padded_vocab,
        "rotary_base": float(shape.rope_theta),
        "rope_scaling_factor": rope_factor,
        "norm_epsilon": shape.norm_eps,
        "add_qkv_bias": shape.qkv_bias,
        "untie_embeddings_and_output_weights": not shape.tied_embeddings,
        # kernels per platform
        "attention_backend": ATTENTION_BACKEND[platform],
        "gradient_accumulation_fusion": GRADIENT_ACCUMULATION_FUSION[platform],
        **FIXED,
        **(FP8_FIXED if cfg.fp8 else {}),
    }


def differences(expected: dict[str, Any], effective: dict[str, Any], framework: str) -> list[tuple[str, Any, Any]]:
    """(setting, expected, effective) for every setting the framework resolved to another value.

    A setting missing from ``effective`` counts as a difference (the resolver must read
    every key), except the framework's :data:`INHERENT` ones.
    """
    skip = INHERENT.get(framework, {})
    out = []
    for key, want in expected.items():
        if key in skip:
            continue
        got = effective.get(key, "<not resolved>")
        if not same(want, got):
            out.append((key, want, got))
    return out


def same(want: Any, got: Any) -> bool:
    """Equal, with floats compared to 1e-9 relative (3e-4 parsed by three parsers)."""
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(want - got) <= 1e-9 * max(abs(want), abs(got), 1e-30)
    return want == got


# config.env workload key -> the effective setting that must equal it (utils.config.load.WORKLOAD_KEYS spelling).
WORKLOAD_SETTINGS: dict[str, str] = {
    "SEED": "seed", "MBS": "micro_batch_size", "GBS": "global_batch_size", "SL": "seq_length",
    "TRAIN_ITERS": "train_iters", "LR": "lr", "MIN_LR": "min_lr", "LR_DECAY": "lr_decay_style",
    "WARMUP_STEPS": "lr_warmup_iters", "WEIGHT_DECAY": "weight_decay", "BETA1": "adam_beta1",
    "BETA2": "adam_beta2", "GRAD_CLIP": "clip_grad", "INIT_STD": "init_method_std",
    "TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size", "CP": "context_parallel_size",
    "DP": "data_parallel_size", "PRECISION": "precision",
}


def contradictions(workload: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Where a result's effective settings contradict its own workload (for ``evaluate/analysis/validation.py``).

    Only keys present on both sides are compared (a ``tran`` record or an older result may
    lack some); FP8 is compared as on/off.
    """
    found = []
    for key, setting in WORKLOAD_SETTINGS.items():
        if workload.get(key) is None or settings.get(setting) is None:
            continue
        if not same(workload[key], settings[setting]):
            found.append(f"effective {setting}={settings[setting]!r} but workload {key}={workload[key]!r}")
    if workload.get("FP8") is not None and "fp8" in settings and bool(settings["fp8"]) != bool(workload["FP8"]):
        found.append(f"effective fp8={settings['fp8']!r} but workload FP8={workload['FP8']!r}")
    return found
