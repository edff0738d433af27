"""The inputs of a Megatron-style job (``mega``, ``prim``): encoded data, tokenizer, index cache, vocabulary.

The plugins import this module rather than each other.
"""

from __future__ import annotations

from pathlib import Path

from train.launch.contract import RunContext
from train.megatron.args import VocabPadding, vocab_padding
from utils.config.model import Config
from utils.dataset.paths import JobData, missing_files
from utils.spec.models import ModelShape, workload_shape


def index_cache_dir(cfg: Config) -> Path:
    """Where Megatron caches its sample/shuffle indices (shared by mega and prim: same indices)."""
    return cfg.data_dir / "megatron_index_cache"


def model_inputs(ctx: RunContext) -> tuple[ModelShape, VocabPadding]:
    """The job's model shape and vocabulary padding (its data and tokenizer: ``ctx.data``)."""
    shape = workload_shape(ctx.cfg, ctx.model)
    return shape, vocab_padding(ctx.cfg, shape, ctx.data.tokenizer_dir)


def missing_data(data: JobData) -> str | None:
    """Why the encoded training set or the tokenizer is not usable, or None when both are there."""
    missing = missing_files(data.prefix, data.tokenizer_dir)
    if not missing:
        return None
    return f"data not prepared: missing {', '.join(map(str, missing))}; run ./shell/run_data.sh first"
