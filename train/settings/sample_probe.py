"""Samples of a framework's own megatron-core ``GPTDataset``: run in the framework's Python.

``python -m train.settings.sample_probe REQUESTS.json`` (each request names its ``.npz`` output; ``"split":
"valid"`` builds a held-out set as ``--valid-data-path`` does), with the framework's code first on ``PYTHONPATH``
(``train/settings/samples.py``; the tests use the megatron-core wheels). It imports only the standard library,
numpy, transformers and the framework, so the dataset code judged is the framework's.

A Megatron-LM tree has no compiled ``helpers_cpp`` until ``pretrain_gpt.py`` builds it at start-up, after the
preflight: where it cannot be imported the probe compiles it with Megatron's own ``compile_helpers``, this
Python's directories first on ``PATH`` so the Makefile builds a module this Python imports.

The tokenizer handed to the dataset is built the way each stack builds it: ``megatron-core``
(``MegatronTokenizer.from_pretrained``, or the legacy class for a 0.12 tree), ``megatron-legacy`` (Primus v0.5.0's
``_HuggingFaceTokenizer``), ``nemo`` (NeMo 2.3's ``AutoTokenizer``), ``nemo-roles`` where NeMo is not installed
(:class:`NemoRoles` gives the three facts the dataset reads: pad, eod, vocab_size).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import sysconfig
from collections import OrderedDict
from pathlib import Path

import numpy as np


class NemoRoles:
    """What megatron-core's ``GPTDataset`` reads from NeMo 2.3's ``AutoTokenizer`` over ``path``."""

    def __init__(self, path: str) -> None:
        # transformers: 2.5 s to import (python -X importtime), only for NeMo's tokenizer
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(path, use_fast=True)
        self.vocab_size = len(hf)
        self.eod = hf.convert_tokens_to_ids(hf.eos_token)
        self.pad = None if hf.pad_token is None else hf.convert_tokens_to_ids(hf.pad_token)
        self.unique_identifiers = OrderedDict(
            {"class": "nemo.collections.common.tokenizers.huggingface.auto_tokenizer.AutoTokenizer"})


def dataset_tokenizer(kind: str, path: str):
    if kind == "megatron-core":
        try:
            # the framework's own code: importable only in its Python, where the probe runs
            from megatron.core.tokenizers import MegatronTokenizer
        except ModuleNotFoundError as exc:  # a Megatron-LM before megatron.core.tokenizers (the 0.12 line)
            if exc.name != "megatron.core.tokenizers":
                raise
            # whose pretrain_gpt.py hands the dataset get_tokenizer(): the legacy class (core_v0.12.0 line 262)
            return dataset_tokenizer("megatron-legacy", path)
        return MegatronTokenizer.from_pretrained(tokenizer_path=path, metadata_path={"library": "huggingface"},
                                                 vocab_file=None, merges_file=None)
    if kind == "megatron-legacy":
        # the framework's own code: importable only in its Python, where the probe runs
        from megatron.training.tokenizer.tokenizer import _HuggingFaceTokenizer

        return _HuggingFaceTokenizer(path)
    if kind == "nemo":
        # the framework's own code: importable only in its Python, where the probe runs
        from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer

        return AutoTokenizer(path, use_fast=True)
    if kind == "nemo-roles":
        return NemoRoles(path)
    raise ValueError(f"unknown tokenizer kind {kind!r}")


def ensure_dataset_helpers() -> str | None:
    """Megatron's compiled dataset helpers, compiled by Megatron's own ``compile_helpers`` where absent.

    Returns what was done (None: they were there). Raises ``ImportError`` when they still do not
    import, naming the compiler's failure: the framework's dataset could not be built.
    """
    try:
        importlib.import_module("megatron.core.datasets.helpers_cpp")
        return None
    except ImportError:
        pass
    # the framework's own code: importable only in its Python, where the probe runs
    from megatron.core.datasets import utils

    first = [os.path.dirname(sys.executable), sysconfig.get_config_var("BINDIR") or ""]
    os.environ["PATH"] = os.pathsep.join([*(d for d in first if d), os.environ.get("PATH", "")])
    try:
        utils.compile_helpers()
    except SystemExit as exc:  # compile_helpers exits 1 when make fails (its output went to stderr)
        raise ImportError(f"megatron.core.datasets.helpers_cpp is not compiled and Megatron's compile_helpers "
                          f"failed (make exit, status {exc.code}) in {os.path.dirname(utils.__file__)}") from None
    importlib.invalidate_caches()
    importlib.import_module("megatron.core.datasets.helpers_cpp")
    return f"compiled megatron.core.datasets.helpers_cpp with Megatron's compile_helpers in {utils.__file__}"


def split_arguments(prefix: str, valid: bool) -> dict:
    """The dataset config's data arguments: the training prefix as ``--data-path P --split 100,0,0`` builds it, or
    a validation prefix as ``--valid-data-path V`` does (issue 34): a split of its own, ``blend_per_split``'s second
    entry, over all of its documents. megatron-core builds each split of ``blend_per_split`` from its own blend
    alone (``blended_megatron_dataset_builder.py``, "each split comes from a separate distribution": l.225-250 at
    847781764f, l.272-287 at 3cdfd613), so the other entries are left out here (``pretrain_gpt.py`` passes the
    training prefix as the first; NeMo's data module the validation prefix as the third, read 0 times)."""
    if valid:
        return {"blend": None, "blend_per_split": [None, ([prefix], None), None], "split": None}
    return {"blend": ([prefix], None), "blend_per_split": None, "split": "100,0,0"}


def samples(request: dict) -> None:
    """Build the dataset of one request and write its first ``num_samples`` samples to ``request["out"]``."""
    # the framework's own code, in its Python only (split_arguments is imported without it)
    import megatron.core
    import transformers

    compiled = ensure_dataset_helpers()
    if compiled:
        print(f"sample_probe: {compiled}", file=sys.stderr)
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    tokenizer = dataset_tokenizer(request["tokenizer"], request["tokenizer_dir"])
    count = request["num_samples"]  # read; the dataset is sized as the job asks for (it decides the shuffle)
    size = request.get("dataset_samples", count)
    valid = request.get("split", "train") == "valid"
    config = GPTDatasetConfig(
        random_seed=request["seed"], sequence_length=request["seq_len"], **split_arguments(request["prefix"], valid),
        path_to_cache=request["cache_dir"], mmap_bin_files=True,
        tokenizer=tokenizer, reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=False,
    )
    sizes = [0, size, 0] if valid else [size, 0, 0]
    dataset = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()[1 if valid else 0]
    # One persistent reader (a loader worker) takes every sample in turn, so a mask cached and
    # changed in place by one sample would show in the later ones.
    items = [dataset[index] for index in range(count)]
    pad = getattr(dataset, "_pad_token_id", None)
    np.savez(request["out"], tokens=np.stack([item["tokens"].numpy() for item in items]),
             labels=np.stack([item["labels"].numpy() for item in items]),
             loss_mask=np.stack([item["loss_mask"].numpy() for item in items]),
             core_version=np.array(megatron.core.__version__), core_file=np.array(megatron.core.__file__),
             pad=np.array(-2 if pad is None else pad), transformers_version=np.array(transformers.__version__))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.settings.sample_probe",
        description="Build samples with the framework's own megatron-core GPTDataset (run in the framework's "
        "Python by train/settings/samples.py); REQUESTS.json is a list of requests, each naming its .npz output.")
    parser.add_argument("requests", type=Path, metavar="REQUESTS.json")
    args = parser.parse_args(argv)
    try:
        requests = json.loads(args.requests.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"sample_probe: cannot read {args.requests}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(requests, list) or not all(isinstance(one, dict) for one in requests):
        print(f"sample_probe: {args.requests} must hold a list of request objects", file=sys.stderr)
        return 2
    for one in requests:
        samples(one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
