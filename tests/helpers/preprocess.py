"""What Megatron-LM's ``tools/preprocess_data.py --append-eod`` writes, computed in-process with Megatron's own code.

No Megatron-LM tree is needed: the tokenizer comes from the megatron-core wheel in the
virtualenv, whose ``megatron.core.tokenizers`` (0.16.1) has the same ``HuggingFaceTokenizer``
as ``MEGATRON_REF`` 847781764f in every function ``preprocess_data`` uses (``__init__``'s
special tokens, ``text_to_ids``, ``eod``, ``vocab_size``; the wheel only adds chat-template
handling and rank-0 logging), built as that ref's ``build_tokenizer`` builds it for
``--tokenizer-type HuggingFaceTokenizer`` (library ``huggingface``, no vocab or merges file).
The per-document loop is ``Encoder.encode`` and ``Partition.process_json_file`` of that ref:
``json.loads``, ``tokenize``, the eod after a non-empty document, ``add_document(ids, [len])``
(``add_document([], [])`` for an empty one), megatron-core's ``IndexedDatasetBuilder``.

``policy="tokenizer"`` swaps in core_v0.12.0's legacy ``_HuggingFaceTokenizer``
(``AutoTokenizer(path)(text).input_ids``, ``eos_token_id`` as eod, ``len(tokenizer)``), which
the wheel does not ship (it is ``megatron.training``), written out here in its three lines.
The fetched-tree conformance test (tests/conformance/test_conformance_preprocess_data.py)
runs the real script instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class _LegacyHuggingFaceTokenizer:
    """core_v0.12.0 ``megatron/training/tokenizer/tokenizer.py::_HuggingFaceTokenizer``, the calls used."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(str(path))

    @property
    def vocab_size(self) -> int:
        return len(self._tokenizer)

    def tokenize(self, text: str) -> list[int]:
        return self._tokenizer(text).input_ids

    @property
    def eod(self) -> int:
        return self._tokenizer.eos_token_id


def megatron_tokenizer(tok_dir: Path, policy: str = "megatron") -> Any:
    """The tokenizer preprocess_data builds: at 847781764f (``megatron``), or core_v0.12.0's (``tokenizer``)."""
    if policy == "tokenizer":
        return _LegacyHuggingFaceTokenizer(tok_dir)
    from megatron.core.tokenizers import MegatronTokenizer

    return MegatronTokenizer.from_pretrained(tokenizer_path=str(tok_dir), metadata_path={"library": "huggingface"},
                                             vocab_file=None, merges_file=None)


def preprocess_data_in_process(corpus: Path, tok_dir: Path, prefix: Path, policy: str = "megatron") -> Path:
    """Write ``prefix.bin/.idx`` as preprocess_data does for ``--append-eod`` (one worker, same order)."""
    from megatron.core.datasets import indexed_dataset

    tokenizer = megatron_tokenizer(tok_dir, policy)
    builder = indexed_dataset.IndexedDatasetBuilder(
        f"{prefix}.bin", dtype=indexed_dataset.DType.optimal_dtype(tokenizer.vocab_size))
    with corpus.open("r", encoding="utf-8") as lines:
        for line in lines:
            text = json.loads(line)["text"]
            ids = tokenizer.tokenize(text)
            lengths = [len(ids)] if len(ids) > 0 else []
            if len(ids) > 0:
                ids = [*ids, tokenizer.eod]
                lengths[-1] += 1
            builder.add_document(ids, lengths)
    builder.finalize(f"{prefix}.idx")
    return prefix
