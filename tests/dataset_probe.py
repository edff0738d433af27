"""Samples of megatron-core's own ``GPTDataset``, built in a side environment of one megatron-core wheel.

Run by ``tests/helpers_megatron_core.py`` as ``python tests/dataset_probe.py REQUESTS.json`` (a list of
requests, each naming its ``.npz`` output; one process, so torch is imported once) with the wheel's
directory first on ``PYTHONPATH`` (torch and transformers come from the project's
virtualenv). It imports only the standard library, numpy, transformers and the wheel's
``megatron.core``, so the dataset code judged is the wheel's, never the virtualenv's.

The tokenizer handed to the dataset is built the way each stack builds it:

* ``megatron-core``: ``megatron.core.tokenizers.MegatronTokenizer.from_pretrained`` with the metadata
  ``{"library": "huggingface"}``: what Megatron-LM's ``pretrain_gpt.py`` at ``MEGATRON_REF`` calls
  (``megatron/core/tokenizers/text/utils/build_tokenizer.py: build_tokenizer``) for
  ``--tokenizer-type HuggingFaceTokenizer``; the class is the wheel's own.
* ``nemo-roles``: NeMo 2.3's ``AutoTokenizer`` is not in the wheel; the dataset reads three of its
  facts (``nemo/collections/common/tokenizers/tokenizer_spec.py``: ``pad`` is ``pad_id``, the
  Hugging Face tokenizer's pad token id or None; ``eod`` is the EOS id; ``vocab_size`` is
  ``len(tokenizer)``), which :class:`NemoRoles` gives from the same files.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np


class NemoRoles:
    """What megatron-core's ``GPTDataset`` reads from NeMo 2.3's ``AutoTokenizer`` over ``path``."""

    def __init__(self, path: str) -> None:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(path, use_fast=True)
        self.vocab_size = len(hf)
        self.eod = hf.convert_tokens_to_ids(hf.eos_token)
        self.pad = None if hf.pad_token is None else hf.convert_tokens_to_ids(hf.pad_token)
        self.unique_identifiers = OrderedDict(
            {"class": "nemo.collections.common.tokenizers.huggingface.auto_tokenizer.AutoTokenizer"})


def dataset_tokenizer(kind: str, path: str):
    if kind == "megatron-core":
        from megatron.core.tokenizers import MegatronTokenizer

        return MegatronTokenizer.from_pretrained(tokenizer_path=path, metadata_path={"library": "huggingface"},
                                                 vocab_file=None, merges_file=None)
    if kind == "nemo-roles":
        return NemoRoles(path)
    raise ValueError(f"unknown tokenizer kind {kind!r}")


def samples(request: dict) -> None:
    """Build the dataset of one request and write its first ``num_samples`` samples to ``request["out"]``."""
    import megatron.core
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    tokenizer = dataset_tokenizer(request["tokenizer"], request["tokenizer_dir"])
    config = GPTDatasetConfig(
        random_seed=request["seed"], sequence_length=request["seq_len"], blend=([request["prefix"]], None),
        blend_per_split=None, split="100,0,0", path_to_cache=request["cache_dir"], mmap_bin_files=True,
        tokenizer=tokenizer, reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=False,
    )
    count = request["num_samples"]
    dataset, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [count, 0, 0], lambda: True, config).build()
    # One persistent reader (a loader worker) takes every sample in turn, so a mask cached and
    # changed in place by one sample would show in the later ones.
    items = [dataset[index] for index in range(count)]
    pad = getattr(dataset, "_pad_token_id", None)
    np.savez(request["out"], tokens=np.stack([item["tokens"].numpy() for item in items]),
             labels=np.stack([item["labels"].numpy() for item in items]),
             loss_mask=np.stack([item["loss_mask"].numpy() for item in items]),
             core_version=np.array(megatron.core.__version__), core_file=np.array(megatron.core.__file__),
             pad=np.array(-2 if pad is None else pad))


if __name__ == "__main__":
    for one in json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")):
        samples(one)
