"""What a model's architecture is: :class:`ModelShape`, one decoder-only model at one size.

A leaf module, so the registry's rows can hold a shape and ``utils/spec/models.py`` read them without an import cycle;
the result's ``model_shape`` block is derived from these fields, in this order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


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
