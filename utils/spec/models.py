"""Model shapes by size, MODEL_LAYERS proxies and FLOPs: what every framework and the FLOPs counter use.

Why one place: a comparison is fair only if every stack builds the same network; launchers turn a
:class:`ModelShape` into their own flags, and nothing else hard-codes layer counts. FLOPs per token follow Megatron's
dense formula, with full and with causal attention: both are reported, labelled, as published numbers use either.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from utils.spec.registry import MODELS
from utils.spec.shape import ModelShape

SIZES = ("full", "tiny")


def proxy_label(display_name: str, layers: int, depth: int) -> str:
    """The label a MODEL_LAYERS proxy carries everywhere (workload, result, compare): ``... [8 of 32 layers]``."""
    return f"{display_name} [{layers} of {depth} layers]"


def check_layers(model: str, size: str, layers: int) -> None:
    """A one-line error unless ``layers`` is a depth ``model`` at ``size`` can be cut to (1 to its own depth)."""
    depth = get_shape(model, size).num_layers
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= depth:
        raise ValueError(f"MODEL_LAYERS={layers!r}: {model} ({size}) has {depth} layers; use 1 to {depth}")


def get_shape(model: str, size: str = "full", vocab_size: int | None = None, layers: int | None = None) -> ModelShape:
    """Shape of ``model`` (a registry model) at ``size`` (full|tiny). ``vocab_size`` replaces the table's (tiny models
    take their tokenizer's; a framework that pads passes its padded size). ``layers`` (MODEL_LAYERS) keeps the width
    with that many layers: a labelled proxy (:func:`proxy_label`) that never passes for the whole model."""
    if size not in SIZES:
        raise ValueError(f"MODEL_SIZE={size!r}: allowed values are {', '.join(SIZES)}")
    if model not in MODELS:
        raise ValueError(f"model {model!r}: allowed values are {', '.join(MODELS)}")
    row = MODELS[model]
    shape = row.shape
    if size == "tiny":
        shape = dataclasses.replace(shape, size="tiny", display_name=f"{row.display_name} (tiny)", **row.tiny)
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
