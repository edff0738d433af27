"""Helpers of the conformance tests: every generated configuration through the real Megatron-LM, Primus and NeMo code.

Beside the CI suite, not in it: they run only where the variables point at real installs
(docs/CONFORMANCE.md has the recipe and the versions that passed) and are skipped with the
reason otherwise. Each test runs :func:`train.launch.preflight.preflight`, the very path a launch
takes, so a pass means the framework accepted the configuration and resolved every setting
of the fairness table to the required value.

* ``TPRIMAT_MEGATRON_LM`` (+ ``TPRIMAT_MEGATRON_PYTHON``): a Megatron-LM tree (mega);
* ``TPRIMAT_PRIMUS`` (+ ``TPRIMAT_MEGATRON_PYTHON``): a Primus tree with its submodule (prim);
* ``TPRIMAT_NEMO_PYTHON``: a Python with NeMo 2 and nemo_run (nemo).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from data.clean import normalize
from data.encode import encode_documents
from data.sample_corpus import SampleSpec, generate_documents
from tests.helpers.megatron import make_config, make_context
from tests.helpers.nemo import make_dataset_stub
from tests.helpers.tokenizers import real_format_tokenizer
from train.launch.context import load_plugin
from train.rules.versions import tree_commit
from utils.config.model import Config
from utils.dataset.paths import dataset_prefix, load_tokenizer, tokenizer_dir
from utils.spec.registry import model_names

# bf16 and FP8, TP 1/2, CP 1/2 on 8 GPUs; GA keeps GBS at 64.
VARIANTS = {
    f"{'fp8' if fp8 else 'bf16'}-tp{tp}-cp{cp}": {"FP8": str(fp8).lower(), "TP": str(tp), "CP": str(cp),
                                                   "DP": str(8 // (tp * cp)), "GA": str(64 // (8 // (tp * cp)))}
    for fp8 in (False, True) for tp in (1, 2) for cp in (1, 2)
}


@functools.lru_cache(maxsize=1)
def _release_format_tokenizers() -> dict[str, Path]:
    """Each model's tokenizer in its release's format, slow-class files included (built once per session).

    Not a ``PreTrainedTokenizerFast`` for every model (issue 40): that shortcut hid that Megatron's own tokenizer
    builds the class the release's config names, which the sample tokenizers could not give it.
    """
    root = Path(tempfile.mkdtemp(prefix="tprimat-conformance-tokenizers-"))
    return {model: real_format_tokenizer(model, root / model) for model in model_names()}


def conformance_config(tmp_path: Path, variant: str, **extra: str) -> Config:
    cfg = make_config(tmp_path, DATASET="sample", MODEL_SIZE="full", TRAIN_ITERS="30", WARMUP_STEPS="5",
                      **VARIANTS[variant], **extra)
    return with_release_tokenizers(cfg)


def with_release_tokenizers(cfg: Config) -> Config:
    """``cfg``'s data folder given each model's release-format tokenizer and a dataset stub."""
    for model, source in _release_format_tokenizers().items():
        shutil.copytree(source, tokenizer_dir(cfg, model))
        make_dataset_stub(cfg.data_dir / f"sample-{model}_text_document")
    return cfg


def with_encoded_data(cfg: Config) -> Config:
    """``cfg``'s stubs replaced by a small corpus encoded for every model, as data/clean.py and data/encode.py
    leave it, so the preflight's samples digest runs the framework's own dataset and tokenizer code on it."""
    texts = [text for text in (normalize(raw) for raw in generate_documents(SampleSpec(seed=11, target_bytes=60_000)))
             if text]
    for model in model_names():
        prefix = dataset_prefix(cfg, model)
        for suffix in (".bin", ".idx"):
            Path(f"{prefix}{suffix}").unlink(missing_ok=True)
        encode_documents(texts, load_tokenizer(tokenizer_dir(cfg, model)), prefix, workers=1, progress=False,
                         fast_path=False)
    return cfg


def planned(cfg: Config, platform: str, framework: str, model: str):
    ctx = make_context(cfg, platform, framework, model, dry_run=True)
    return ctx, load_plugin(framework).plan(ctx)


def needs(variable: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not os.environ.get(variable), reason=f"{variable} is not set: conformance against "
                              "the real framework code runs where it points at an install (docs/CONFORMANCE.md)")


def megatron_ref_of(tree: str) -> str:
    """The tree's own commit: the run is judged as if MEGATRON_REF named it."""
    commit, how = tree_commit(Path(tree))
    assert commit, how
    return commit
