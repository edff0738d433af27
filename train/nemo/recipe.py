"""Config -> NeMo 2 recipe-field overrides, as plain data: no NeMo import anywhere in this file.

``--dry-run`` shows the fields the ``nemo`` launcher sets on a machine without NeMo, and the training process applies
that same summary. Every workload key is set explicitly: the recipes carry their own defaults (context parallelism 2
and a mock data module in ``llama31_8b``, TP 2 in ``qwen25_7b``, Adam epsilon 1e-5, periodic checkpoints, resume).

Object values are ``{"_target_": "module.attr", "_call_": "config"|"factory"|"member", **kwargs}``: a
``nemo_run.Config``, a recipe factory's result (``bf16_mixed()``), or an enum member (``AttnBackend.fused``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.megatron.args import optimizer_settings
from train.profiles import IDENTICAL, AppliedProfile
from train.settings.expected import ATTENTION_BACKEND as EXPECTED_ATTENTION_BACKEND
from train.settings.expected import FIXED, FP8_FIXED, GRADIENT_ACCUMULATION_FUSION
from utils.config.model import Config
from utils.spec.models import ModelShape
from utils.spec.registry import MODELS

NEMO_IMAGE = "nvcr.io/nvidia/nemo:25.04"
NEMO_VERSION = "2.3 (the NeMo in the 25.04 container)"


PRECISION_PLUGINS: dict[tuple[str, bool], dict[str, Any]] = {
    ("bf16", False): {"_target_": "nemo.collections.llm.recipes.precision.mixed_precision.bf16_mixed",
                      "_call_": "factory"},
    ("bf16", True): {"_target_": "nemo.collections.llm.recipes.precision.mixed_precision.bf16_with_fp8_mixed",
                     "_call_": "factory"},
    ("fp16", False): {"_target_": "nemo.collections.llm.recipes.precision.mixed_precision.fp16_mixed",
                      "_call_": "factory"},
    ("fp32", False): {"_target_": "nemo.lightning.MegatronMixedPrecision", "_call_": "config", "precision": "32"},
}

SCHEDULERS: dict[str, str] = {
    # linear warm-up then cosine to MIN_LR at TRAIN_ITERS (constant_steps=0: no hold)
    "cosine": "nemo.lightning.pytorch.optim.CosineAnnealingScheduler",
    # linear warm-up then linear decay to MIN_LR at TRAIN_ITERS
    "linear": "nemo.lightning.pytorch.optim.WarmupAnnealingScheduler",
    # linear warm-up then constant LR
    "constant": "nemo.lightning.pytorch.optim.WarmupPolicyScheduler",
}

# The attention backend of the mega launcher on nvd (train/megatron/args.py), so both NVIDIA
# stacks run the same cuDNN fused attention; NeMo's model config defaults to auto.
ATTENTION_BACKEND = EXPECTED_ATTENTION_BACKEND["nvd"]
# Fusions stated outright: NeMo's Qwen2Config leaves four of them at TransformerConfig's False and GPTConfig computes
# softmax in bf16; mega and prim run every fusion (docs/CONFORMANCE.md).
MODEL_CONFIG_FIXED: dict[str, Any] = {
    "model.config.bias_activation_fusion": FIXED["bias_activation_fusion"],
    "model.config.bias_dropout_fusion": FIXED["bias_dropout_fusion"],
    "model.config.masked_softmax_fusion": FIXED["masked_softmax_fusion"],
    "model.config.persist_layer_norm": FIXED["persist_layer_norm"],
    "model.config.apply_rope_fusion": FIXED["apply_rope_fusion"],
    "model.config.cross_entropy_loss_fusion": FIXED["cross_entropy_loss_fusion"],
    "model.config.gradient_accumulation_fusion": GRADIENT_ACCUMULATION_FUSION["nvd"],
    "model.config.attention_softmax_in_fp32": FIXED["attention_softmax_in_fp32"],
    "model.config.fp32_residual_connection": FIXED["fp32_residual_connection"],
    "model.config.recompute_granularity": FIXED["recompute_granularity"],
    "model.config.tp_comm_overlap": FIXED["tp_comm_overlap"],
    # NeMo's MistralConfig7B says a2a (for the window removed above): p2p as mega and prim (train/rules/cp_comm.py)
    "model.config.cp_comm_type": FIXED["cp_comm_type"],
    "model.config.calculate_per_token_loss": FIXED["calculate_per_token_loss"],
    "model.config.hidden_dropout": FIXED["hidden_dropout"],
    "model.config.attention_dropout": FIXED["attention_dropout"],
}
ATTN_BACKEND_ENUM = "megatron.core.transformer.enums.AttnBackend"
DDP_CONFIG = "megatron.core.distributed.DistributedDataParallelConfig"

# How NeMo spells a tuned recipe's framework settings (train/profiles/): fields of Megatron's DDP config
# (by their name there), of the model config, of the precision plugin, and the two callbacks.
PROFILE_DDP_FIELDS = {"overlap_grad_reduce": "overlap_grad_reduce", "overlap_param_gather": "overlap_param_gather",
                      "ddp_average_in_collective": "average_in_collective", "ddp_bucket_size": "bucket_size",
                      "grad_reduce_in_fp32": "grad_reduce_in_fp32"}
PROFILE_MODEL_FIELDS = ("cross_entropy_fusion_impl", "tp_comm_overlap", "gradient_accumulation_fusion")
PROFILE_PLUGIN_FIELDS = ("grad_reduce_in_fp32", *FP8_FIXED)
TIMING_CALLBACK = "nemo.utils.exp_manager.TimingCallback"  # the recipes' own (train/nemo/callback.py reads it)
GC_CALLBACK = "nemo.lightning.pytorch.callbacks.garbage_collection.GarbageCollectionCallback"

PRETRAINING_DATA_MODULE = "nemo.collections.llm.gpt.data.pre_training.PreTrainingDataModule"
HF_TOKENIZER = "nemo.collections.common.tokenizers.huggingface.auto_tokenizer.AutoTokenizer"
NEMO_LOGGER = "nemo.lightning.NeMoLogger"


@dataclass
class NemoOverrides:
    """The recipe to start from, its factory arguments and every field tprimat sets on it."""

    model: str
    recipe: str
    recipe_kwargs: dict[str, Any]
    fields: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "recipe": self.recipe, "recipe_kwargs": self.recipe_kwargs,
                "fields": self.fields, "notes": self.notes}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NemoOverrides:
        missing = [key for key in ("model", "recipe", "recipe_kwargs", "fields") if key not in data]
        if missing:
            raise ValueError(f"NeMo overrides lack {', '.join(missing)}")
        return cls(model=data["model"], recipe=data["recipe"], recipe_kwargs=dict(data["recipe_kwargs"]),
                   fields=dict(data["fields"]), notes=list(data.get("notes") or []))


def precision_plugin(cfg: Config) -> dict[str, Any]:
    """The Megatron mixed-precision plugin for PRECISION (+ FP8 on top of bf16)."""
    key = (cfg.precision, cfg.fp8)
    if key not in PRECISION_PLUGINS:
        raise ValueError(f"PRECISION={cfg.precision} with FP8={cfg.fp8}: no NeMo precision plugin for it")
    return dict(PRECISION_PLUGINS[key])


def ddp_config() -> dict[str, Any]:
    """Megatron's DDP settings under the fairness table (the same for every model's recipe)."""
    return {
        "_target_": DDP_CONFIG, "_call_": "config",
        "grad_reduce_in_fp32": False,
        "overlap_grad_reduce": FIXED["overlap_grad_reduce"],
        "overlap_param_gather": FIXED["overlap_param_gather"],
        "use_distributed_optimizer": FIXED["use_distributed_optimizer"],
        "check_for_nan_in_grad": FIXED["check_for_nan_in_grad"],
        "average_in_collective": FIXED["ddp_average_in_collective"],
    }


def lr_scheduler(cfg: Config) -> dict[str, Any]:
    """Warm-up for WARMUP_STEPS, then LR_DECAY to MIN_LR at LR_DECAY_ITERS (else TRAIN_ITERS); ``max_steps`` must be
    given: the NeMo scheduler modules default it to 10, not to the trainer's step count."""
    spec: dict[str, Any] = {
        "_target_": SCHEDULERS[cfg.lr_decay], "_call_": "config",
        "warmup_steps": cfg.warmup_steps, "max_steps": cfg.decay_iters, "min_lr": cfg.min_lr,
    }
    if cfg.lr_decay == "cosine":
        spec["constant_steps"] = 0
    return spec


def model_fields(cfg: Config, model: str, shape: ModelShape) -> dict[str, Any]:
    """The architecture from tprimat's shape table, so NeMo builds the network every framework builds."""
    fields: dict[str, Any] = {
        "model.config.num_layers": shape.num_layers,
        "model.config.hidden_size": shape.hidden_size,
        "model.config.ffn_hidden_size": shape.ffn_hidden_size,
        "model.config.num_attention_heads": shape.num_attention_heads,
        "model.config.num_query_groups": shape.num_query_groups,
        # Set, not derived: NeMo would otherwise pad the tokenizer's size to a multiple of 128.
        "model.config.vocab_size": shape.vocab_size,
        "model.config.seq_length": cfg.sl,
        "model.config.rotary_base": shape.rope_theta,
        "model.config.layernorm_epsilon": shape.norm_eps,
        "model.config.add_qkv_bias": shape.qkv_bias,
        "model.config.share_embeddings_and_output_weights": shape.tied_embeddings,
        "model.config.init_method_std": cfg.init_std,
        "model.config.attention_backend": {"_target_": ATTN_BACKEND_ENUM, "_call_": "member",
                                           "name": ATTENTION_BACKEND},
        **MODEL_CONFIG_FIXED,
    }
    if shape.rope_scaling:  # Llama 3.1's
        scaling = shape.rope_scaling
        fields.update({
            "model.config.scale_factor": scaling["factor"],
            "model.config.low_freq_factor": scaling["low_freq_factor"],
            "model.config.high_freq_factor": scaling["high_freq_factor"],
            "model.config.old_context_len": scaling["original_max_position_embeddings"],
        })
    return fields


def profile_fields(fields: dict[str, Any], profile: AppliedProfile) -> None:
    """Set a tuned recipe's framework settings on the recipe fields (in place); an unknown key is an error (``fp8``
    needs no field: FP8=true already picks ``bf16_with_fp8_mixed``)."""
    known = {*PROFILE_DDP_FIELDS, *PROFILE_PLUGIN_FIELDS, *PROFILE_MODEL_FIELDS, "attention_backend", "manual_gc",
             "manual_gc_interval", "fp8"}
    unknown = sorted(set(profile.settings) - known)
    if unknown:
        raise ValueError(f"profile setting(s) {', '.join(unknown)}: no NeMo field for them (train/nemo/recipe.py)")
    for key, value in profile.settings.items():
        if key in PROFILE_DDP_FIELDS:
            fields["trainer.strategy.ddp"][PROFILE_DDP_FIELDS[key]] = value
        if key in PROFILE_PLUGIN_FIELDS:
            fields[f"trainer.plugins.{key}"] = value
        if key in PROFILE_MODEL_FIELDS:
            fields[f"model.config.{key}"] = value
        if key == "attention_backend":
            fields["model.config.attention_backend"] = {"_target_": ATTN_BACKEND_ENUM, "_call_": "member",
                                                        "name": value}
        if key == "manual_gc":
            interval = profile.setting("manual_gc_interval")
            gc = [{"_target_": GC_CALLBACK, "_call_": "config", "gc_interval_train": interval,
                   "gc_interval_val": interval}] if value else []
            fields["trainer.callbacks"] = [{"_target_": TIMING_CALLBACK, "_call_": "config"}, *gc]


def evaluation_fields(cfg: Config, data_prefix: Path, valid_prefix: Path | None,
                      data: dict[str, Any]) -> dict[str, Any]:
    """The recipe fields of held-out evaluation; {} when EVAL_INTERVAL/EVAL_SAMPLES leave it off. The data module needs
    all three ``paths`` keys (``nemo/collections/llm/gpt/data/pre_training.py:66-82, 189-197``), so the test split names
    the validation prefix too and is never read (``limit_test_batches`` 0)."""
    if not cfg.evaluates or valid_prefix is None:
        return {}
    return {
        "trainer.limit_val_batches": cfg.eval_iters,
        "trainer.val_check_interval": cfg.eval_interval_steps,
        "data": {**data, "paths": {"train": [str(data_prefix)], "validation": [str(valid_prefix)],
                                   "test": [str(valid_prefix)]}},
    }


def build_overrides(
    cfg: Config,
    model: str,
    shape: ModelShape,
    *,
    data_prefix: Path,
    tokenizer_dir: Path,
    log_dir: Path,
    index_cache_dir: Path,
    profile: AppliedProfile = IDENTICAL,
    valid_prefix: Path | None = None,
) -> NemoOverrides:
    """Every recipe field tprimat sets for ``model`` under ``cfg``, as JSON-ready data. ``shape`` must already carry the
    real vocabulary (:func:`train.nemo.plugin.resolve_shape`)."""
    if model not in MODELS:
        raise ValueError(f"model {model!r}: allowed values are {', '.join(MODELS)}")
    stack = MODELS[model].stacks
    fields: dict[str, Any] = {
        # -- trainer: steps, layout, no validation, no checkpoints, one log line per step
        "trainer.max_steps": cfg.train_iters,
        "trainer.num_nodes": cfg.nnodes,
        "trainer.devices": cfg.gpus_per_node,
        # Gradient accumulation is Megatron's: GBS / (MBS * DP) micro-batches per step.
        "trainer.accumulate_grad_batches": 1,
        "trainer.log_every_n_steps": 1,
        "trainer.limit_val_batches": 0,
        "trainer.limit_test_batches": 0,
        "trainer.num_sanity_val_steps": 0,
        # An int (PreTrainingDataModule divides by it); with limit_val_batches=0 nothing is validated.
        "trainer.val_check_interval": cfg.train_iters,
        "trainer.enable_checkpointing": False,
        "trainer.plugins": precision_plugin(cfg),
        "trainer.strategy.tensor_model_parallel_size": cfg.tp,
        "trainer.strategy.pipeline_model_parallel_size": cfg.pp,
        "trainer.strategy.context_parallel_size": cfg.cp,
        "trainer.strategy.virtual_pipeline_model_parallel_size": None,
        # Megatron's usual pairing: sequence parallelism whenever tensor parallelism is on.
        "trainer.strategy.sequence_parallel": cfg.tp > 1,
        "trainer.strategy.ckpt_async_save": False,
        # Gradient reduction as the fairness table has it. A whole DDP config, not single fields: qwen25_7b's
        # strategy has no ddp config (the string "megatron"), so its fields cannot be set one by one.
        "trainer.strategy.ddp": ddp_config(),
        # The bf16 precision plugin would set ddp.grad_reduce_in_fp32 back to True when the
        # strategy connects it; its own field decides (docs/CONFORMANCE.md).
        "trainer.plugins.grad_reduce_in_fp32": False,
        # FP8 as mega and prim run it; bf16_with_fp8_mixed would also gather parameters in FP8.
        **({f"trainer.plugins.{key}": value for key, value in FP8_FIXED.items()} if cfg.fp8 else {}),
        # -- model
        **model_fields(cfg, model, shape),
        **stack.nemo_fields,  # recipe fields the shape contradicts (the registry's row says why)
        # -- optimizer: Megatron distributed AdamW (decoupled weight decay)
        "optim.config.optimizer": "adam",
        "optim.config.lr": cfg.lr,
        "optim.config.min_lr": cfg.min_lr,
        # mega's values (ADAM_EPS too: the NeMo recipe's own 1e-5 would be a silent difference); weight_decay is
        # named first only to keep its place in the summary
        "optim.config.weight_decay": cfg.weight_decay,
        **{f"optim.config.{key}": value for key, value in optimizer_settings(cfg).items()},
        "optim.config.use_distributed_optimizer": FIXED["use_distributed_optimizer"],
        "optim.lr_scheduler": lr_scheduler(cfg),
        # -- data: the .bin/.idx that data/ wrote, read with the real tokenizer (never mock data)
        "data": {
            "_target_": PRETRAINING_DATA_MODULE, "_call_": "config",
            "paths": [str(data_prefix)],
            "seq_length": cfg.sl,
            "micro_batch_size": cfg.mbs,
            "global_batch_size": cfg.gbs,
            "tokenizer": {"_target_": HF_TOKENIZER, "_call_": "config",
                          "pretrained_model_name": str(tokenizer_dir), "use_fast": True},
            # Everything to training: validation is off, so nothing is held out.
            "split": FIXED["data_split"],
            "seed": cfg.seed,
            "index_mapping_dir": str(index_cache_dir),
            "reset_position_ids": FIXED["reset_position_ids"],
            "reset_attention_mask": FIXED["reset_attention_mask"],
            "eod_mask_loss": FIXED["eod_mask_loss"],
            # The same loader as mega and prim: workers, and no materialised attention mask.
            "num_workers": FIXED["num_workers"],
            "persistent_workers": FIXED["persistent_workers"],
            "create_attention_mask": FIXED["create_attention_mask"],
        },
        # -- logging: NeMo's own log files only; no checkpoint callback, no TensorBoard/W&B
        "log": {"_target_": NEMO_LOGGER, "_call_": "config", "name": f"tprimat_{model}",
                "log_dir": str(log_dir), "use_datetime_version": False, "ckpt": None,
                "tensorboard": None, "wandb": None},
        # A benchmark never resumes from an earlier run's checkpoint.
        "resume": None,
    }
    fields.update(evaluation_fields(cfg, data_prefix, valid_prefix, fields["data"]))
    profile_fields(fields, profile)
    tp, pp, cp = stack.nemo_parallel
    notes = [
        f"recipe {stack.nemo_recipe} defaults to TP={tp} PP={pp} CP={cp}; "
        f"tprimat sets TP={cfg.tp} PP={cfg.pp} CP={cfg.cp} from config",
        f"GBS={cfg.gbs} = MBS {cfg.mbs} x DP {cfg.dp} x GA {cfg.ga}: Megatron runs GBS/(MBS*DP) = "
        f"{cfg.ga} micro-batches per step",
        f"SEED={cfg.seed} seeds the data order here and the model init in the training process "
        "(NeMo 2.3's strategy seeds with a fixed 1234, so tprimat re-seeds before the model is built)",
        f"Adam epsilon {cfg.adam_eps} (ADAM_EPS; the recipe's own is 1e-5)",
    ]
    return NemoOverrides(
        model=model,
        recipe=stack.nemo_recipe,
        recipe_kwargs={"name": f"tprimat_{model}", "dir": str(log_dir), "num_nodes": cfg.nnodes,
                       "num_gpus_per_node": cfg.gpus_per_node},
        fields=fields,
        notes=notes,
    )
