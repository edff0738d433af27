"""The Megatron-LM settings of one tprimat workload, shared by the ``mega`` and ``prim`` launchers.

Keyed by Megatron's argument *dest* names, exactly the keys Primus accepts in an experiment's ``overrides``, and
rendered as flags by :func:`render_cli`, so the two launchers cannot drift apart. Every choice that is not a
``config.env`` key comes from the fairness table (:data:`train.settings.expected.FIXED`; docs/CONFORMANCE.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.profiles import IDENTICAL, AppliedProfile
from train.settings.expected import ATTENTION_BACKEND as EXPECTED_ATTENTION_BACKEND
from train.settings.expected import FIXED, FP8_FIXED, GRADIENT_ACCUMULATION_FUSION, implementation_settings
from utils.config.model import Config
from utils.dataset.paths import load_tokenizer, vocab_size
from utils.measure.memory import Recipe, megatron_recipe
from utils.spec.models import ModelShape
from utils.spec.registry import MODELS

ATTENTION_BACKEND = EXPECTED_ATTENTION_BACKEND

# Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * TP (vocab_size_with_padding); 128 is
# its default, the others are tried in this order when 128 does not land on the model's vocabulary.
DIVISOR_PREFERENCE = (128, 256, 512, 1024, 64, 32, 16, 8, 4, 2, 1)

# Megatron store_false flags: the dest is True by default and this flag sets it False.
NEGATIVE_FLAGS = {
    "add_bias_linear": "--disable-bias-linear",
    "gradient_accumulation_fusion": "--no-gradient-accumulation-fusion",
    "bias_swiglu_fusion": "--no-bias-swiglu-fusion",
    "bias_dropout_fusion": "--no-bias-dropout-fusion",
    "masked_softmax_fusion": "--no-masked-softmax-fusion",
    "apply_rope_fusion": "--no-rope-fusion",
    "create_attention_mask_in_dataloader": "--no-create-attention-mask-in-dataloader",
    "check_for_nan_in_loss_and_grad": "--no-check-for-nan-in-loss-and-grad",
}
# Flags whose spelling is not the dest name with dashes.
FLAG_NAMES = {"fp8": "--fp8-format"}
FP8_SETTINGS = {"fp8": "hybrid", **FP8_FIXED}


@dataclass(frozen=True)
class VocabPadding:
    """How Megatron's padded vocabulary was made to equal the model's."""

    tokenizer_size: int
    tokenizer_size_source: str
    target: int
    divisible_by: int
    padded: int

    @property
    def matches_target(self) -> bool:
        return self.padded == self.target

    def note(self) -> str:
        text = (f"vocabulary: tokenizer has {self.tokenizer_size} tokens ({self.tokenizer_size_source}); "
                f"--make-vocab-size-divisible-by {self.divisible_by} pads it to {self.padded}")
        if not self.matches_target:
            text += f", not the model's {self.target}: FLOPs and the result's model_shape use {self.padded}"
        return text


def megatron_padded_vocab(tokenizer_size: int, divisible_by: int, tp: int) -> int:
    """Megatron's rule: round up to a multiple of ``divisible_by * TP``."""
    multiple = divisible_by * tp
    return math.ceil(tokenizer_size / multiple) * multiple


def choose_vocab_padding(tokenizer_size: int, target: int, tp: int) -> tuple[int, int]:
    """The first divisor (128 preferred) whose padding lands exactly on ``target``, else Megatron's default 128
    (the caller records the padded size it produces), e.g. Qwen 2.5's 151665 tokens need 512 for 152064 at TP 1."""
    for divisor in DIVISOR_PREFERENCE:
        if megatron_padded_vocab(tokenizer_size, divisor, tp) == target:
            return divisor, target
    return 128, megatron_padded_vocab(tokenizer_size, 128, tp)


def tokenizer_size(cfg: Config, shape: ModelShape, tokenizer_dir: Path | None) -> tuple[int, str]:
    """``len(tokenizer)`` and where it came from: the files when present, else the known real size."""
    if tokenizer_dir is not None and any((Path(tokenizer_dir) / n).is_file()
                                         for n in ("tokenizer.json", "tokenizer_config.json")):
        return vocab_size(load_tokenizer(Path(tokenizer_dir))), f"counted from {tokenizer_dir}"
    if cfg.dataset == "sample":
        return cfg.sample_vocab, f"SAMPLE_VOCAB (tokenizer files not found in {tokenizer_dir})"
    known = MODELS[shape.key].stacks.megatron_tokenizer_size  # only where the files are not (a laptop dry run)
    return known, f"known size of the real tokenizer (files not found in {tokenizer_dir})"


def vocab_padding(cfg: Config, shape: ModelShape, tokenizer_dir: Path | None) -> VocabPadding:
    """Padding that makes Megatron's embedding the shape table's size (tiny models: the tokenizer's)."""
    size, source = tokenizer_size(cfg, shape, tokenizer_dir)
    target = shape.vocab_size if shape.size == "full" else size
    divisor, padded = choose_vocab_padding(size, target, cfg.tp)
    return VocabPadding(size, source, target, divisor, padded)


def attention_backend(platform: str, profile: AppliedProfile = IDENTICAL, megatron_impl: str = "transformer_engine"
                      ) -> str:
    """The platform's attention backend (the fairness table's), the tuned recipe's, or MEGATRON_IMPL=local's."""
    return implementation_settings(megatron_impl).get("attention_backend") or profile.setting(
        "attention_backend", ATTENTION_BACKEND[platform])


def implementation_args(megatron_impl: str) -> dict[str, Any]:
    """MEGATRON_IMPL's settings (train.settings.expected.implementation_settings) as Megatron argument dests."""
    wanted = implementation_settings(megatron_impl)
    args = {key: value for key, value in wanted.items() if key != "persist_layer_norm"}
    if "persist_layer_norm" in wanted:
        args["no_persist_layer_norm"] = not wanted["persist_layer_norm"]
    return args


def profile_settings(profile: AppliedProfile) -> dict[str, Any]:
    """A tuned recipe's framework settings (train/profiles/) as Megatron argument dests; Primus reads the same.
    Only the reduction dtype is renamed: the recipe's ``grad_reduce_in_fp32``, Megatron's ``--grad-reduce-in-bf16``."""
    settings = dict(profile.settings)
    if settings.pop("grad_reduce_in_fp32", False):
        settings["grad_reduce_in_bf16"] = False
    return settings


def optimizer_settings(cfg: Config) -> dict[str, Any]:
    """Adam, weight decay, clipping and the dtype flags of megatron-core's ``OptimizerConfig``: Megatron's argument
    dests, and the field names of NeMo's ``optim.config`` (train/nemo/recipe.py)."""
    return {
        "adam_beta1": cfg.beta1,
        "adam_beta2": cfg.beta2,
        "adam_eps": cfg.adam_eps,
        "weight_decay": cfg.weight_decay,
        "clip_grad": cfg.grad_clip,
        "bf16": cfg.precision == "bf16",
        "fp16": cfg.precision == "fp16",
    }


def megatron_settings(
    cfg: Config,
    shape: ModelShape,
    platform: str,
    tokenizer_dir: Path,
    padding: VocabPadding,
    profile: AppliedProfile = IDENTICAL,
) -> dict[str, Any]:
    """Every Megatron argument (dest name -> value) the workload fixes, data paths excepted (each launcher adds its
    own); under PROFILE=tuned the recipe's settings replace the fairness table's."""
    if platform not in ATTENTION_BACKEND:
        raise ValueError(f"platform {platform!r}: Megatron runs on {', '.join(ATTENTION_BACKEND)}")
    settings: dict[str, Any] = {
        # ---- model (from the shape table) ----
        "num_layers": shape.num_layers,
        "hidden_size": shape.hidden_size,
        "ffn_hidden_size": shape.ffn_hidden_size,
        "num_attention_heads": shape.num_attention_heads,
        "group_query_attention": True,
        "num_query_groups": shape.num_query_groups,
        "swiglu": shape.swiglu,
        "normalization": FIXED["normalization"],
        "norm_epsilon": shape.norm_eps,
        "position_embedding_type": "rope",
        "rotary_base": int(shape.rope_theta),
        "rotary_percent": 1.0,
        "use_rope_scaling": shape.rope_scaling is not None,
        "untie_embeddings_and_output_weights": not shape.tied_embeddings,
        "add_bias_linear": False,
        "add_qkv_bias": shape.qkv_bias,
        "hidden_dropout": FIXED["hidden_dropout"],
        "attention_dropout": FIXED["attention_dropout"],
        "init_method_std": cfg.init_std,
        "make_vocab_size_divisible_by": padding.divisible_by,
        "seq_length": cfg.sl,
        "max_position_embeddings": shape.max_position_embeddings,
        "transformer_impl": cfg.megatron_impl,
        "attention_backend": ATTENTION_BACKEND[platform],
        # ---- batch and parallelism ----
        "micro_batch_size": cfg.mbs,
        "global_batch_size": cfg.gbs,
        "tensor_model_parallel_size": cfg.tp,
        "pipeline_model_parallel_size": cfg.pp,
        "context_parallel_size": cfg.cp,
        "sequence_parallel": cfg.tp > 1,
        "cp_comm_type": FIXED["cp_comm_type"],  # stated outright, as nemo's (train/rules/cp_comm.py)
        "use_distributed_optimizer": FIXED["use_distributed_optimizer"],
        # The fairness table: no overlap of gradient reduction or parameter gathering on either vendor (the same for
        # nemo); gradients reduced in bf16 under bf16 (Megatron's validation would otherwise switch them to fp32).
        "overlap_grad_reduce": FIXED["overlap_grad_reduce"],
        "overlap_param_gather": FIXED["overlap_param_gather"],
        "ddp_average_in_collective": FIXED["ddp_average_in_collective"],
        "check_for_nan_in_loss_and_grad": FIXED["check_for_nan_in_grad"],
        "tp_comm_overlap": FIXED["tp_comm_overlap"],
        # ---- fusions: every one on, stated outright (Primus's model files turn masked-softmax fusion off and fp32
        # softmax on, Megatron's defaults leave cross-entropy fusion off), see docs/CONFORMANCE.md
        "gradient_accumulation_fusion": GRADIENT_ACCUMULATION_FUSION[platform],
        "bias_swiglu_fusion": FIXED["bias_activation_fusion"],
        "bias_dropout_fusion": FIXED["bias_dropout_fusion"],
        "masked_softmax_fusion": FIXED["masked_softmax_fusion"],
        "no_persist_layer_norm": not FIXED["persist_layer_norm"],
        "apply_rope_fusion": FIXED["apply_rope_fusion"],
        "cross_entropy_loss_fusion": FIXED["cross_entropy_loss_fusion"],
        "attention_softmax_in_fp32": FIXED["attention_softmax_in_fp32"],
        "fp32_residual_connection": FIXED["fp32_residual_connection"],
        "recompute_granularity": FIXED["recompute_granularity"],
        "manual_gc": FIXED["manual_gc"],
        "calculate_per_token_loss": FIXED["calculate_per_token_loss"],
        # ---- optimizer and schedule ----
        "seed": cfg.seed,
        "train_iters": cfg.train_iters,
        "optimizer": "adam",
        "lr": cfg.lr,
        "min_lr": cfg.min_lr,
        "lr_decay_style": cfg.lr_decay,
        "lr_warmup_iters": cfg.warmup_steps,
        "lr_decay_iters": cfg.decay_iters,
        **optimizer_settings(cfg),
        # ---- precision ----
        "fp8": None,
        "grad_reduce_in_bf16": cfg.precision == "bf16",
        # ---- data, evaluation, logging ----
        "tokenizer_type": "HuggingFaceTokenizer",
        "tokenizer_model": str(tokenizer_dir),
        "dataloader_type": FIXED["dataloader_type"],
        # Megatron's default is 2 workers, Primus's pre_trainer 8, NeMo's data module 8: one value everywhere.
        "num_workers": FIXED["num_workers"],
        # No [1, 1, s, s] mask per sample: causal masking happens in the attention kernel (NeMo's default
        # with Transformer Engine; Megatron and Primus build the mask unless told not to).
        "create_attention_mask_in_dataloader": FIXED["create_attention_mask"],
        "eod_mask_loss": FIXED["eod_mask_loss"],
        "reset_position_ids": FIXED["reset_position_ids"],
        "reset_attention_mask": FIXED["reset_attention_mask"],
        "eval_iters": cfg.eval_iters,
        "eval_interval": cfg.train_iters,
        "log_interval": FIXED["log_interval"],
        "log_throughput": True,
        # Megatron-LM 0.15 (MEGATRON_REF's default) re-runs suspicious steps unless told not to; 0.12 and
        # Primus default to disabled.
        "rerun_mode": FIXED["rerun_mode"],
        # No periodic checkpoints (Primus's pre_trainer saves every 1000 iterations into its workspace).
        "save_interval": FIXED["checkpoint_interval"],
    }
    if shape.rope_scaling is not None:
        settings["rope_scaling_factor"] = float(shape.rope_scaling["factor"])
    if cfg.fp8:
        settings.update(FP8_SETTINGS)
    settings.update(profile_settings(profile))
    settings.update(implementation_args(cfg.megatron_impl))  # what local cannot run goes, whatever asked for it
    settings.update(evaluation_settings(cfg))
    return settings


def evaluation_settings(cfg: Config) -> dict[str, Any]:
    """Megatron's own evaluation arguments (dest names) when EVAL_INTERVAL/EVAL_SAMPLES turn it on; {} when off. At
    MEGATRON_REF (``megatron/training/arguments.py:2104-2111, 2702-2713``) the validation iterator continues
    (``training.py:2356, 2871``: not MLPerf's fixed set, train/logs/quality.py ``MEGATRON_BLOCKS``); never
    ``full_validation`` (it exhausts a one-epoch iterator at the first evaluation for GBS > 1, ``training.py:2719``);
    ``exit_signal_handler`` stops every rank after the step (``training.py:1830-1845``) at one all-gather per step."""
    if not cfg.evaluates:
        return {}
    return {"eval_iters": cfg.eval_iters, "eval_interval": cfg.eval_interval_steps, "exit_signal_handler": True}


def evaluation_data(cfg: Config, train_prefix: Path, valid: Path | None) -> dict[str, Any]:
    """The data arguments (dest names) of a Megatron run: with evaluation, the training and the validation prefix
    as separate splits (``pretrain_gpt.py`` builds ``blend_per_split = [train, valid, None]``, the validation set
    a ``GPTDataset`` over all of its file's documents); without, all of the training prefix to training."""
    if cfg.evaluates and valid is not None:
        return {"data_path": None, "split": None, "train_data_path": [str(train_prefix)],
                "valid_data_path": [str(valid)], "test_data_path": None}
    return {"data_path": [str(train_prefix)], "split": FIXED["data_split"]}


def flag_name(dest: str) -> str:
    return FLAG_NAMES.get(dest, "--" + dest.replace("_", "-"))


def _render_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)  # shortest exact form: 3e-05, 1e-05, 0.95
    return str(value)


def render_cli(settings: dict[str, Any]) -> list[str]:
    """Megatron command-line flags for ``settings``; ``None`` and default-valued booleans are omitted."""
    argv: list[str] = []
    for dest, value in settings.items():
        if value is None:
            continue
        if isinstance(value, bool):
            if dest in NEGATIVE_FLAGS:
                if not value:
                    argv.append(NEGATIVE_FLAGS[dest])
            elif value:
                argv.append(flag_name(dest))
            continue
        if isinstance(value, (list, tuple)):
            argv += [flag_name(dest), *(_render_value(v) for v in value)]
            continue
        argv += [flag_name(dest), _render_value(value)]
    return argv


def memory_recipe(cfg: Config, framework: str, transformer_impl: str | None = None) -> Recipe:
    """How Megatron holds the model as :func:`megatron_settings` configures it, for the memory check (the
    implementation matters: 17% more activation memory under ``local`` on the H200 proxy of docs/PERFORMANCE.md)."""
    return megatron_recipe(framework, transformer_impl=transformer_impl or cfg.megatron_impl,
                           distributed_optimizer=bool(FIXED["use_distributed_optimizer"]),
                           grad_reduce_in_fp32=cfg.precision != "bf16")
