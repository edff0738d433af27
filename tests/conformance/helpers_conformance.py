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
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from data.clean import normalize
from data.encode import encode_documents
from data.sample_corpus import SampleSpec, generate_documents
from tests.helpers.megatron import make_config, make_context
from tests.helpers.nemo import REPO, make_dataset_stub
from tests.helpers.tokenizers import real_format_tokenizer
from train.launch.context import load_plugin
from train.megatron.inputs import index_cache_dir
from train.rules.samples import MegatronSamples, valid_num_samples
from train.rules.versions import tree_commit
from utils.config.model import Config
from utils.dataset.paths import dataset_prefix, eod_id, load_tokenizer, tokenizer_dir, valid_prefix, vocab_size
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


def with_encoded_data(cfg: Config, valid: bool = False, models: tuple[str, ...] | None = None) -> Config:
    """``cfg``'s stubs replaced by a small corpus encoded for every model, as data/clean.py and data/encode.py
    leave it, so the preflight's samples digest runs the framework's own dataset and tokenizer code on it; with
    ``valid``, a held-out set of other documents at each model's validation prefix too (``models``: every model)."""
    for prefix_of, seed in ((dataset_prefix, 11), *([(valid_prefix, 12)] if valid else [])):
        _encode(cfg, prefix_of, seed, models or tuple(model_names()))
    return cfg


def _encode(cfg: Config, prefix_of, seed: int, models: tuple[str, ...]) -> None:
    texts = [text for text in (normalize(raw) for raw in generate_documents(SampleSpec(seed=seed, target_bytes=60_000)))
             if text]
    for model in models:
        prefix = prefix_of(cfg, model)
        for suffix in (".bin", ".idx"):
            Path(f"{prefix}{suffix}").unlink(missing_ok=True)
        encode_documents(texts, load_tokenizer(tokenizer_dir(cfg, model)), prefix, workers=1, progress=False,
                         fast_path=False)
    return cfg


def trans_validation_samples(cfg: Config, first: int, count: int) -> np.ndarray:
    """Global validation samples [first, first + count) as tran and deep build them (SL + 1 tokens each)."""
    tokenizer = load_tokenizer(tokenizer_dir(cfg, "llama"))
    samples = MegatronSamples(valid_prefix(cfg, "llama"), cfg.sl, cfg.seed,
                              valid_num_samples(cfg.train_iters, cfg.eval_interval_steps, cfg.eval_samples),
                              index_cache_dir(cfg), vocab_size(tokenizer), eod_id(tokenizer), split="valid")
    return np.stack([samples.sample(g) for g in range(first, first + count)])


def run_evaluate_probe(python: str, script: str, request: dict, work: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Run a conformance probe (``tests/conformance/<script>.py REQUEST.json``, from the repository root, in the
    framework's Python): its JSON answer and the arrays it saved beside it. ``runpy`` from the root, not ``-m``: a
    framework Python may hold a ``tests`` package of its own (NeMo's does)."""
    out = work / f"{script}.json"
    (work / "request.json").write_text(json.dumps({**request, "out": str(out)}), encoding="utf-8")
    run = f"import runpy; runpy.run_path('tests/conformance/{script}.py', run_name='__main__')"
    done = subprocess.run([python, "-c", run, str(work / "request.json")], cwd=REPO, capture_output=True,
                          text=True, timeout=1800, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(f"{out}.npz") as arrays:
        return json.loads(out.read_text(encoding="utf-8")), dict(arrays)


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
