"""One digest of the samples a framework feeds its model: tokens, labels and loss mask, in global order.

Why: equal data and tokenizer hashes do not prove equal training data (megatron-core's dataset masked Qwen's EOD
tokens on three stacks while ``tran`` trained on them: docs/SAMPLE_ORDER.md). Each framework's own dataset code builds
the first two global batches, each result records their digest (:data:`DIGEST_KEY`), and the comparison refuses
results whose digests differ. Only the standard library and numpy, so a probe in a framework's Python computes alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

DIGEST_KEY = "samples_digest"
GLOBAL_BATCHES = 2  # the first two global batches: GBS samples each
_HEADER = b"tprimat-samples-v1"


@dataclass(frozen=True)
class FedSample:
    """One sample as the model receives it: ``[SL]`` tokens, labels and loss mask."""

    tokens: np.ndarray
    labels: np.ndarray
    loss_mask: np.ndarray


def digest_samples(samples: Iterable[FedSample]) -> str:
    """``sha256:<hex>`` over every sample's tokens and labels (int64) and loss mask (float32), in order."""
    digest = hashlib.sha256(_HEADER)
    count = 0
    for sample in samples:
        for array, dtype in ((sample.tokens, "<i8"), (sample.labels, "<i8"), (sample.loss_mask, "<f4")):
            values = np.ascontiguousarray(np.asarray(array), dtype=dtype)
            digest.update(len(values).to_bytes(8, "little"))
            digest.update(values.tobytes())
        count += 1
    digest.update(count.to_bytes(8, "little"))
    return f"sha256:{digest.hexdigest()}"


def first_difference(ours: list[FedSample], theirs: list[FedSample]) -> str | None:
    """Where two sample lists first differ, in words (sample, position, what, both values); None if equal."""
    if len(ours) != len(theirs):
        return f"{len(ours)} samples against {len(theirs)}"
    for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for name in ("tokens", "labels", "loss_mask"):
            left, right = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
            if left.shape != right.shape:
                return f"sample {index}: {name} of {left.shape[0]} positions against {right.shape[0]}"
            where = np.flatnonzero(left != right)
            if len(where):
                position = int(where[0])
                return f"sample {index}, position {position}: {name} {left[position]} against {right[position]}"
    return None


def global_sample_count(gbs: int) -> int:
    """How many samples the digest covers: the first :data:`GLOBAL_BATCHES` global batches."""
    return GLOBAL_BATCHES * gbs
