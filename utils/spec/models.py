"""Model shapes and FLOPs: the one table every framework and the FLOPs counter use.

Why one table: a comparison is only fair if Megatron, Primus, NeMo and the
``tran`` reference build the same network. Launchers turn a :class:`ModelShape`
into their own flags; nothing else hard-codes layer counts or vocab sizes.

FLOPs follow Megatron's dense formula divided by tokens:
``6 * N'`` for the weight matmuls (forward + backward, multiply-add = 2 FLOPs) plus
``12 * L * s * h`` for attention scores and values with full attention, or half of
that when only the causal half is counted. Both conventions are always reported,
each labelled, because published numbers use either.

Where the full shapes come from: each model's published ``config.json``. Mistral 7B v0.3
is the published config.json of mistralai/Mistral-7B-v0.3 (the values as mirrored from it,
and identical in mistralai/Mistral-7B-Instruct-v0.3's config.json at revision c170c708):
32 layers, hidden 4096, intermediate 14336, 32 heads, 8 key/value heads, vocabulary 32768,
``rope_theta`` 1e6, ``rms_norm_eps`` 1e-5, ``tie_word_embeddings`` false,
``max_position_embeddings`` 32768 and ``sliding_window`` null. No model in the table uses
sliding-window attention (Mistral v0.1's 4096-token window is gone in v0.3), so every
launcher builds full causal attention; docs/MODELS.md lists the sources.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from utils.spec.registry import MODELS

LLAMA3_ROPE_SCALING: dict[str, Any] = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


@dataclass(frozen=True)
class ModelShape:
    """Architecture of one decoder-only model at one size."""

    key: str  # a model of utils/spec/registry.py
    size: str  # "full" | "tiny"
    display_name: str  # the registry's name, plus " (tiny)" for the tiny shape
    hf_repo: str  # where the real tokenizer comes from
    hf_architecture: str  # transformers class used by the tran reference
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int  # key/value heads (GQA)
    vocab_size: int
    rope_theta: float
    norm_eps: float
    qkv_bias: bool
    max_position_embeddings: int
    rope_scaling: dict[str, Any] | None = None
    swiglu: bool = True
    tied_embeddings: bool = False
    # MODEL_LAYERS=N: this shape is a proxy with N of the model's ``proxy_of_layers`` layers (width, heads and
    # vocabulary unchanged); None for the model's own depth.
    proxy_of_layers: int | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def parameter_count(self) -> int:
        """Parameters including embeddings and norms (for reporting model size)."""
        h, f, L = self.hidden_size, self.ffn_hidden_size, self.num_layers
        d, a, g = self.head_dim, self.num_attention_heads, self.num_query_groups
        attn = h * d * (a + 2 * g) + h * h + (d * (a + 2 * g) if self.qkv_bias else 0)
        mlp = (3 if self.swiglu else 2) * h * f
        per_layer = attn + mlp + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return L * per_layer + embeddings + h

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_FULL = {
    "llama": ModelShape(
        key="llama", size="full", display_name=MODELS["llama"].display_name, hf_repo="meta-llama/Llama-3.1-8B",
        hf_architecture="LlamaForCausalLM", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
        num_attention_heads=32, num_query_groups=8, vocab_size=128256, rope_theta=500000.0,
        norm_eps=1e-5, qkv_bias=False, max_position_embeddings=131072, rope_scaling=LLAMA3_ROPE_SCALING,
    ),
    "qwen": ModelShape(
        key="qwen", size="full", display_name=MODELS["qwen"].display_name, hf_repo="Qwen/Qwen2.5-7B",
        hf_architecture="Qwen2ForCausalLM", num_layers=28, hidden_size=3584, ffn_hidden_size=18944,
        num_attention_heads=28, num_query_groups=4, vocab_size=152064, rope_theta=1000000.0,
        norm_eps=1e-6, qkv_bias=True, max_position_embeddings=131072,
    ),
    "mistral": ModelShape(
        key="mistral", size="full", display_name=MODELS["mistral"].display_name, hf_repo="mistralai/Mistral-7B-v0.3",
        hf_architecture="MistralForCausalLM", num_layers=32, hidden_size=4096, ffn_hidden_size=14336,
        num_attention_heads=32, num_query_groups=8, vocab_size=32768, rope_theta=1000000.0,
        norm_eps=1e-5, qkv_bias=False, max_position_embeddings=32768,
    ),
}

# Tiny shapes keep every architectural feature (GQA ratio 4:1, 7:1 and 4:1, SwiGLU with the
# same ffn/hidden ratio, QKV bias, RoPE base and scaling, untied embeddings) at
# dimensions where a step takes well under a second on 2 CPU cores.
_TINY = {
    "llama": dataclasses.replace(
        _FULL["llama"], size="tiny", display_name=f"{MODELS['llama'].display_name} (tiny)", num_layers=2,
        hidden_size=128, ffn_hidden_size=448, num_attention_heads=8, num_query_groups=2, max_position_embeddings=16384,
    ),
    "qwen": dataclasses.replace(
        _FULL["qwen"], size="tiny", display_name=f"{MODELS['qwen'].display_name} (tiny)", num_layers=2,
        hidden_size=112, ffn_hidden_size=592, num_attention_heads=7, num_query_groups=1, max_position_embeddings=8192,
    ),
    # ffn/hidden 3.5 as in 14336/4096, RoPE base 1e6, no QKV bias, no RoPE scaling.
    "mistral": dataclasses.replace(
        _FULL["mistral"], size="tiny", display_name=f"{MODELS['mistral'].display_name} (tiny)", num_layers=2,
        hidden_size=128, ffn_hidden_size=448, num_attention_heads=8, num_query_groups=2, max_position_embeddings=8192,
    ),
}


def proxy_label(display_name: str, layers: int, depth: int) -> str:
    """The label a MODEL_LAYERS proxy carries everywhere (workload, result, compare): ``... [8 of 32 layers]``."""
    return f"{display_name} [{layers} of {depth} layers]"


def check_layers(model: str, size: str, layers: int) -> None:
    """A one-line error unless ``layers`` is a depth ``model`` at ``size`` can be cut to (1 to its own depth)."""
    depth = get_shape(model, size).num_layers
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= depth:
        raise ValueError(f"MODEL_LAYERS={layers!r}: {model} ({size}) has {depth} layers; use 1 to {depth}")


def get_shape(model: str, size: str = "full", vocab_size: int | None = None, layers: int | None = None) -> ModelShape:
    """Shape of ``model`` (a model of utils/spec/registry.py) at ``size`` (full|tiny).

    ``vocab_size`` replaces the table's vocabulary: tiny models take their
    tokenizer's, and a framework that pads the vocabulary passes its padded size.
    ``layers`` (MODEL_LAYERS) keeps the width, heads and vocabulary and uses that many of the
    model's layers: a labelled proxy (``proxy_of_layers``, :func:`proxy_label`), so one GPU can
    measure what one GPU can hold without the result passing for the whole model.
    """
    table = {"full": _FULL, "tiny": _TINY}.get(size)
    if table is None:
        raise ValueError(f"MODEL_SIZE={size!r}: allowed values are full, tiny")
    if model not in table:
        raise ValueError(f"model {model!r}: allowed values are {', '.join(table)}")
    shape = table[model]
    if vocab_size is not None:
        if vocab_size < 1:
            raise ValueError(f"vocab_size={vocab_size}: must be positive")
        shape = dataclasses.replace(shape, vocab_size=vocab_size)
    if layers is not None and layers != shape.num_layers:
        check_layers(model, size, layers)
        shape = dataclasses.replace(shape, num_layers=layers, proxy_of_layers=shape.num_layers,
                                    display_name=proxy_label(shape.display_name, layers, shape.num_layers))
    return shape


def workload_shape(cfg: Any, model: str, vocab_size: int | None = None) -> ModelShape:
    """The shape a job of ``cfg`` trains: MODEL_SIZE, and MODEL_LAYERS when set (the one place both apply)."""
    return get_shape(model, cfg.model_size, vocab_size=vocab_size, layers=cfg.model_layers)


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token under both attention conventions."""

    full: float  # attention over the whole s x s matrix (torchtitan, older NVIDIA numbers)
    causal: float  # only the causal half of attention (NVIDIA's published numbers since 2025)

    def as_dict(self) -> dict[str, Any]:
        return {
            "full": self.full,
            "causal": self.causal,
            "convention": {
                "full": "6*N' + 12*L*s*h (full attention)",
                "causal": "6*N' + 6*L*s*h (causal-halved attention)",
            },
        }


def matmul_weights_per_token(shape: ModelShape) -> int:
    """N': weights touched by matrix multiplies per token (embeddings excluded, output layer included)."""
    h, f, L = shape.hidden_size, shape.ffn_hidden_size, shape.num_layers
    d, a, g = shape.head_dim, shape.num_attention_heads, shape.num_query_groups
    mlp_matrices = 3 if shape.swiglu else 2
    return L * (h * d * (a + 2 * g) + h * h + mlp_matrices * h * f) + h * shape.vocab_size


def flops_per_token(shape: ModelShape, seq_len: int) -> FlopsPerToken:
    """Megatron's dense training FLOPs per token (forward + backward)."""
    if seq_len < 1:
        raise ValueError(f"seq_len={seq_len}: must be positive")
    weights = 6 * matmul_weights_per_token(shape)
    attention_full = 12 * shape.num_layers * seq_len * shape.hidden_size
    return FlopsPerToken(full=float(weights + attention_full), causal=float(weights + attention_full / 2))


def mfu(tokens_per_second_per_gpu: float, flops: float, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation in [0, 1+]; None when the peak is unknown."""
    if peak_tflops is None or peak_tflops <= 0:
        return None
    return tokens_per_second_per_gpu * flops / (peak_tflops * 1e12)
