"""The one registry of platforms, frameworks and models.

Why one table: argparse ``choices``, the job list, the comparison's labels, the result model and the shell all need
these lists. Adding a framework is one entry (plus its plugin package); adding a model is one :class:`Model` row.
The shapes are each model's published ``config.json`` (docs/MODELS.md); the tiny shapes keep every architectural
feature (GQA and SwiGLU ratios, QKV bias, RoPE, untied embeddings) at dimensions a 2-core CPU steps in well under 1 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from utils.spec.shape import ModelShape
from utils.spec.tokenizer import QWEN25_SPLIT_PATTERN, SENTENCEPIECE, SENTENCEPIECE_SPECIALS, TokenizerStyle


@dataclass(frozen=True)
class Platform:
    key: str  # amd | nvd | cpu
    display_name: str  # AMD | NVIDIA | CPU
    software_stack: str  # rocm | cuda | cpu


@dataclass(frozen=True)
class Framework:
    key: str
    display_name: str
    platforms: tuple[str, ...]  # where it runs, in the platforms' order
    plugin: str  # module implementing train/launch/contract.py's Plugin, imported by train/launch/context.py
    # Which node writes a multi-node job's result: "first" (global rank 0 measures in-process)
    # or "last" (Megatron and Primus print their iteration lines on the last rank).
    result_node: str = "first"
    # The framework_versions fields that identify the code it executed (two results of one framework
    # that differ in one measure two versions, not two GPUs: evaluate/analysis/settings_diff.py). torch, CUDA
    # and ROCm differ between vendors by construction and are shown in the hardware table instead.
    version_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stacks:
    """What each vendor stack calls the model, or must be told of it."""

    # len(tokenizer) of the real tokenizer (Megatron's HuggingFaceTokenizer), for a plan made where its files are not.
    megatron_tokenizer_size: int
    # The Primus v0.5.0 model file (primus/configs/models/megatron/) the experiment starts from.
    primus_model_file: str
    # The NeMo 2.3 recipe the run starts from, and the (TP, PP, CP) it would use if not told.
    nemo_recipe: str
    nemo_parallel: tuple[int, int, int]
    # Recipe fields that the shape contradicts, set back to the shape's (train/nemo/recipe.py).
    nemo_fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Model:
    """One model: the one row every package reads its facts from (utils/spec/models.py, data/, train/, evaluate/)."""

    shape: ModelShape  # the full-size architecture: its key, name and the Hub repository of its config and tokenizer
    tiny: dict[str, int]  # the tiny shape: the full one with these dimensions (MODEL_SIZE=tiny)
    gated: bool  # the Hub repository asks for a licence to be accepted (then HF_TOKEN)
    tokenizer: TokenizerStyle  # the release's special tokens and layout (the sample tokenizers copy it)
    stacks: Stacks
    line: str = "-"  # the model's line style in figures (matplotlib), and its bars' hatch
    hatch: str = ""

    @property
    def key(self) -> str:
        return self.shape.key

    @property
    def display_name(self) -> str:
        return self.shape.display_name


PLATFORMS: dict[str, Platform] = {
    p.key: p
    for p in (
        Platform("amd", "AMD", "rocm"),
        Platform("nvd", "NVIDIA", "cuda"),
        Platform("cpu", "CPU", "cpu"),
    )
}

FRAMEWORKS: dict[str, Framework] = {
    f.key: f
    for f in (
        Framework("mega", "Megatron-LM", ("amd", "nvd"), "train.mega.plugin", result_node="last",
                  version_fields=("megatron_lm_commit",)),
        Framework("prim", "Primus", ("amd",), "train.prim.plugin", result_node="last",
                  version_fields=("primus_commit", "primus", "megatron_lm_commit")),
        Framework("nemo", "NeMo", ("nvd",), "train.nemo.plugin", version_fields=("nemo", "megatron_core")),
        Framework("tran", "Transformers (tran)", ("amd", "nvd", "cpu"), "train.tran.plugin",
                  version_fields=("transformers",)),
        Framework("deep", "DeepSpeed", ("amd", "nvd", "cpu"), "train.deep.plugin",
                  version_fields=("deepspeed", "transformers")),
    )
}

# The framework of a published run imported from MLPerf's results (utils/schema/mlperf.py ``Published``): no stack
# tprimat launches (never a choice of FRAMEWORK), the name its results and their files carry.
PUBLISHED_FRAMEWORK = "mlperf"

# One fixed colour per framework in every figure (Okabe-Ito, readable with colour-blindness); platforms are
# told apart by line style and marker (evaluate/render/plots.py), so `nvd · mega` and `amd · mega` share a colour.
FRAMEWORK_COLORS: dict[str, str] = {
    "mega": "#0072B2",  # blue
    "prim": "#D55E00",  # vermilion
    "nemo": "#009E73",  # bluish green
    "tran": "#CC79A7",  # reddish purple
    "deep": "#E69F00",  # orange
}
UNKNOWN_FRAMEWORK_COLOR = "#555555"

LLAMA3_ROPE_SCALING: dict[str, Any] = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
# Meta's Llama 3.1 (ids 128000-128010 of 128256; the rest are more reserved tokens).
LLAMA31_SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>")
# Qwen 2.5 (ids 151643-151656; the tool-call and FIM tokens after them are added but not special).
QWEN25_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                   "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                   "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")

MODELS: dict[str, Model] = {
    m.key: m
    for m in (
        Model(
            ModelShape(key="llama", size="full", display_name="Llama 3.1 8B", hf_repo="meta-llama/Llama-3.1-8B",
                       hf_architecture="LlamaForCausalLM", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                       num_attention_heads=32, num_query_groups=8, vocab_size=128256, rope_theta=500000.0,
                       norm_eps=1e-5, qkv_bias=False, max_position_embeddings=131072,
                       rope_scaling=LLAMA3_ROPE_SCALING),
            tiny=dict(num_layers=2, hidden_size=128, ffn_hidden_size=448, num_attention_heads=8, num_query_groups=2,
                      max_position_embeddings=16384),
            gated=True,
            tokenizer=TokenizerStyle(
                eos="<|end_of_text|>", bos="<|begin_of_text|>", pad=None, specials=LLAMA31_SPECIALS,
                prepend_bos=True, nfc=False, tokenizer_class="PreTrainedTokenizerFast",
                config=(("clean_up_tokenization_spaces", True), ("model_input_names", ["input_ids", "attention_mask"]),
                        ("model_max_length", 131072))),
            # Llama 3.1: 128000 BPE tokens + 256 reserved special tokens.
            stacks=Stacks(megatron_tokenizer_size=128256, primus_model_file="llama3.1_8B.yaml", nemo_parallel=(1, 1, 2),
                          nemo_recipe="nemo.collections.llm.recipes.llama31_8b.pretrain_recipe"),
            line="-", hatch=""),
        Model(
            ModelShape(key="qwen", size="full", display_name="Qwen 2.5 7B", hf_repo="Qwen/Qwen2.5-7B",
                       hf_architecture="Qwen2ForCausalLM", num_layers=28, hidden_size=3584, ffn_hidden_size=18944,
                       num_attention_heads=28, num_query_groups=4, vocab_size=152064, rope_theta=1000000.0,
                       norm_eps=1e-6, qkv_bias=True, max_position_embeddings=131072),
            tiny=dict(num_layers=2, hidden_size=112, ffn_hidden_size=592, num_attention_heads=7, num_query_groups=1,
                      max_position_embeddings=8192),
            gated=False,
            tokenizer=TokenizerStyle(
                eos="<|endoftext|>", bos=None, pad="<|endoftext|>", specials=QWEN25_SPECIALS, prepend_bos=False,
                nfc=True, tokenizer_class="Qwen2Tokenizer", split_pattern=QWEN25_SPLIT_PATTERN,
                config=(("add_prefix_space", False), ("additional_special_tokens", list(QWEN25_SPECIALS[1:])),
                        ("clean_up_tokenization_spaces", False), ("errors", "replace"), ("model_max_length", 131072),
                        ("split_special_tokens", False), ("unk_token", None))),
            # Qwen 2.5: 151643 BPE tokens + 22 special.
            stacks=Stacks(megatron_tokenizer_size=151665, primus_model_file="qwen2.5_7B.yaml", nemo_parallel=(2, 1, 1),
                          nemo_recipe="nemo.collections.llm.recipes.qwen25_7b.pretrain_recipe"),
            line="--", hatch="//"),
        Model(
            ModelShape(key="mistral", size="full", display_name="Mistral 7B v0.3", hf_repo="mistralai/Mistral-7B-v0.3",
                       hf_architecture="MistralForCausalLM", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
                       num_attention_heads=32, num_query_groups=8, vocab_size=32768, rope_theta=1000000.0,
                       norm_eps=1e-5, qkv_bias=False, max_position_embeddings=32768),
            # ffn/hidden 3.5 as in 14336/4096, RoPE base 1e6, no QKV bias, no RoPE scaling.
            tiny=dict(num_layers=2, hidden_size=128, ffn_hidden_size=448, num_attention_heads=8, num_query_groups=2,
                      max_position_embeddings=8192),
            gated=True,
            tokenizer=TokenizerStyle(
                eos="</s>", bos="<s>", pad=None, specials=SENTENCEPIECE_SPECIALS, prepend_bos=True, nfc=False,
                tokenizer_class="LlamaTokenizer", kind=SENTENCEPIECE, unk="<unk>",
                config=(("add_bos_token", True), ("add_eos_token", False), ("clean_up_tokenization_spaces", False),
                        ("legacy", False), ("model_max_length", 1000000000000000019884624838656), ("pad_token", None),
                        ("sp_model_kwargs", {}),
                        ("spaces_between_special_tokens", False), ("use_default_system_prompt", False))),
            # Mistral 7B v0.3: 32768 SentencePiece pieces, control tokens included (a multiple of 128 already).
            # Primus v0.5.0 ships no dense Mistral model file (only Mixtral MoE ones): the dense Llama 2 7B file
            # (RoPE, RMSNorm, SwiGLU, untied, no RoPE scaling; the same fusions as Llama 3's base), with every
            # architecture key set from the shape (docs/MODELS.md). NeMo 2.3's MistralConfig7B
            # (gpt/model/mistral.py) keeps Mistral v0.1's sliding window (window_size [4096, 0]); v0.3 has none.
            stacks=Stacks(megatron_tokenizer_size=32768, primus_model_file="llama2_7B.yaml", nemo_parallel=(1, 1, 2),
                          nemo_recipe="nemo.collections.llm.recipes.mistral_7b.pretrain_recipe",
                          nemo_fields={"model.config.window_size": None}),
            line=":", hatch=".."),
    )
}

# The vendor stack that stands in for the other vendor's when asked for by name: Primus <-> NeMo.
VENDOR_STACK_MAP: dict[tuple[str, str], str] = {
    ("nvd", "prim"): "nemo",
    ("amd", "nemo"): "prim",
}


# FRAMEWORK=all: every framework of the platform (train/launch/jobs.py expands it).
FRAMEWORK_ALL = "all"


def platform_names() -> tuple[str, ...]:
    return tuple(PLATFORMS)


def framework_names() -> tuple[str, ...]:
    return tuple(FRAMEWORKS)


def framework_choices() -> tuple[str, ...]:
    """What ``FRAMEWORK`` may name: a framework or ``all``."""
    return (*FRAMEWORKS, FRAMEWORK_ALL)


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def frameworks_on(platform: str) -> tuple[str, ...]:
    """The frameworks ``platform`` runs, in registry order (``FRAMEWORK=all``)."""
    if platform not in PLATFORMS:
        raise ValueError(f"platform {platform!r} is not valid; use one of: {', '.join(PLATFORMS)}")
    return tuple(key for key, framework in FRAMEWORKS.items() if platform in framework.platforms)


def display_name(kind: str, key: str) -> str:
    """Human name of a platform, framework or model key; the key itself when unknown."""
    table = {"platform": PLATFORMS, "framework": FRAMEWORKS, "model": MODELS}[kind]
    entry = table.get(key)
    return entry.display_name if entry is not None else key


def framework_color(key: str) -> str:
    """The framework's colour in every figure (grey for a framework the registry does not know)."""
    return FRAMEWORK_COLORS.get(key, UNKNOWN_FRAMEWORK_COLOR)
