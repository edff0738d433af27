"""Samples of a framework's own megatron-core ``GPTDataset``: run in the framework's Python, asked from tprimat's.

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

The asking side (:func:`framework_samples`, in tprimat's Python) lives here too, so one module owns the probe's
request, its run and its answer; what it needs of tprimat is imported where it runs, not at the top.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import sysconfig
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from utils.dataset.digest_cache import DigestPlan, Window
    from utils.dataset.paths import JobData
    from utils.dataset.sample_digest import FedSample

# How each framework builds the tokenizer its dataset gets (dataset_tokenizer's kinds).
TOKENIZER_KIND = {"mega": "megatron-core", "prim": "megatron-legacy", "nemo": "nemo"}
# The folders of a Megatron tree (or megatron-core wheel) whose code builds a framework's samples and its tokenizer.
FRAMEWORK_DATASET_CODE = ("megatron/core/datasets", "megatron/core/tokenizers", "megatron/training/tokenizer")
PROBE_TIMEOUT_S = 900
SAMPLE_PROBE = "train.settings.sample_probe"  # this module, as the framework's Python runs it


class SamplesUnavailable(RuntimeError):
    """The framework's own dataset or tokenizer code failed in its Python: its exception, in one line."""


@dataclass(frozen=True)
class SampleSource:
    """Where a framework's own first samples come from (what its plugin's ``resolve`` answers beside the record)."""

    python: str  # the Python whose own dataset code builds them
    code: Path | None = None  # the code put first on its path (a Megatron tree); None: the Python's own
    # Those samples where the settings probe built them in the same Python (pending_samples; the preflight
    # removes their folder), or that build's exception in the framework's words.
    built: Path | None = None
    error: str | None = None


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def framework_error(stderr: str) -> str:
    """The framework's exception line from a probe's stderr (the last ``XxxError: ...``), else its last lines."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return found[-1] if found else " | ".join(lines[-2:]) or "no output"


def unavailable(framework: str, python: str, stderr: str) -> SamplesUnavailable:
    """The framework's own dataset or tokenizer code failed in its Python: its exception line, in one line."""
    return SamplesUnavailable(f"{framework}'s own dataset or tokenizer code failed in {python}: "
                              f"{framework_error(stderr)} (train/settings/sample_probe.py, tokenizer built as "
                              f"{framework} builds it: {TOKENIZER_KIND.get(framework, 'none')})")


def sample_request(data: JobData, window: Window, framework: str, given: Path, work: Path) -> dict[str, Any]:
    """One request of this probe (its ``.npz`` in ``work``): ``framework``'s training samples, its dataset handed
    the tokenizer in ``given``."""
    return {"tokenizer": TOKENIZER_KIND[framework], "tokenizer_dir": str(given),
            "prefix": str(data.prefix), "seq_len": window.seq_len, "seed": window.seed,
            "num_samples": window.train[1], "dataset_samples": window.train[0],
            "cache_dir": str(work / "index_cache"), "out": str(work / "samples.npz")}


def read_samples(out: Path) -> list[FedSample]:
    """The samples a probe wrote (its ``.npz``)."""
    from utils.dataset.sample_digest import FedSample  # tprimat's side only

    data = np.load(out)
    return [FedSample(t, labels, m) for t, labels, m in zip(data["tokens"], data["labels"], data["loss_mask"],
                                                             strict=True)]


def framework_samples(plan: DigestPlan, source: SampleSource, work: Path) -> list[FedSample]:
    """The framework's own samples of ``plan``: its settings probe's failure raised, what it built read, else built
    here by this probe in its Python (``source.code`` first on the path), the validation samples after the
    training ones where the job evaluates. :class:`SamplesUnavailable` when its code fails."""
    from utils.config.model import REPO_ROOT  # tprimat's side only

    assert plan.side is not None and plan.given is not None, "asked for a framework with the tokenizer it is handed"
    framework, python, data, window = plan.side.framework, source.python, plan.data, plan.window
    if source.error is not None:
        raise unavailable(framework, python, source.error)
    if source.built is not None and source.built.is_file():
        return read_samples(source.built)
    request = [sample_request(data, window, framework, plan.given, work)]
    if data.valid is not None and window.valid is not None:  # the validation samples, after the training ones
        request.append({**request[0], "prefix": str(data.valid), "split": "valid", "num_samples": window.valid[1],
                        "dataset_samples": window.valid[0], "out": str(work / "valid_samples.npz")})
    (work / "request.json").write_text(json.dumps(request), encoding="utf-8")
    path = [str(source.code)] if source.code else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        proc = subprocess.run([python, "-m", SAMPLE_PROBE, str(work / "request.json")], capture_output=True,
                              text=True, cwd=REPO_ROOT, env=env, timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SamplesUnavailable(f"{framework}'s own dataset code did not build its first samples in "
                                 f"{PROBE_TIMEOUT_S} s in {python}") from None
    except OSError as exc:
        raise SamplesUnavailable(f"{framework}'s Python {python} cannot be started: {exc}") from None
    if proc.returncode != 0:
        raise unavailable(framework, python, proc.stderr)
    found: list[FedSample] = []
    for one in request:
        written = Path(one["out"])
        if not written.is_file():
            raise SamplesUnavailable(f"{framework}'s dataset probe exited 0 in {python} but wrote no {written.name}")
        found += read_samples(written)
    return found


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
