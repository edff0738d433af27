"""Side environments of megatron-core's own wheels, and the samples their ``GPTDataset`` builds.

Why wheels beside the virtualenv: the vendor images run two megatron-core lines (NeMo 25.04
imports the 0.12 line, commit 3cdfd613; ``mega`` and Primus run 0.15.0rc8, commit 847781764f),
the virtualenv has a third. The PyPI wheels ``megatron-core==0.12.0`` and ``==0.15.0`` carry
exactly those commits' ``megatron/core/datasets`` (and, for 0.15, ``megatron/core/tokenizers``),
with the compiled index helpers for Python 3.11, so CI can judge the images' dataset code
without their trees (docs/CONFORMANCE.md).

Each wheel is installed once, without dependencies, into ``<checkout>/.side/megatron-core-<ver>``
(git-ignored, never shared with another checkout) and reused; ``train/settings/sample_probe.py`` runs in
a subprocess with that directory first on ``PYTHONPATH``, over the virtualenv's torch and
transformers. Setting ``TPRIMAT_SIDE_ENVS=skip`` skips these tests on a machine without the
package index; otherwise a failed install fails them (they must run in CI).

The images' Hugging Face stacks (issue 40): the virtualenv's transformers 5 builds the slow
tokenizer classes from ``tokenizer.json`` alone, which transformers 4 does not, so evidence about
tokenizers gathered there did not hold in the images. :func:`transformers_env` installs the pins of
``tests/conformance/constraints/side-<image>.txt`` (the amd image's transformers 4.57.1, the nvd
image's 4.51.3, each with its tokenizers and huggingface_hub, plus sentencepiece and protobuf for
slow SentencePiece tokenizers), without dependencies, into ``.side/transformers-<image>-<hash>``
(the hash of that file: a changed pin installs afresh; about 130 MB, a few minutes once), and
:func:`side_pythonpath` puts it after the megatron-core wheel and before the virtualenv's own
site-packages, so the probe imports the image's transformers over the virtualenv's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from utils.config.model import REPO_ROOT

SIDE_ROOT = REPO_ROOT / ".side"
# The image each wheel stands for, and the commit whose dataset code it carries (checked by
# comparing megatron/core/datasets file by file against the NVIDIA/Megatron-LM commit).
WHEELS = {
    "0.12.0": "NeMo 25.04's megatron-core (Megatron-LM 3cdfd613, 0.12.0rc4)",
    "0.15.0": "MEGATRON_REF and Primus v0.5.0 (Megatron-LM 847781764f, 0.15.0rc8)",
}
PROBE_MODULE = "train.settings.sample_probe"


def side_env(version: str) -> Path:
    """The directory holding megatron-core ``version``, installed on first use (about 2 MB)."""
    target = SIDE_ROOT / f"megatron-core-{version}"
    done = target / ".tprimat-complete"
    if done.is_file():
        return target
    if os.environ.get("TPRIMAT_SIDE_ENVS") == "skip":
        pytest.skip(f"TPRIMAT_SIDE_ENVS=skip and megatron-core {version} is not in {target}")
    SIDE_ROOT.mkdir(exist_ok=True)
    with (SIDE_ROOT / f"megatron-core-{version}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer per checkout; the others wait and reuse it
        if done.is_file():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--target", str(partial), f"megatron-core=={version}"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if run.returncode != 0:
            pytest.fail(f"cannot install megatron-core {version} into {partial} ({' '.join(command)}): "
                        f"{run.stderr.strip()[-400:]}; TPRIMAT_SIDE_ENVS=skip skips these tests")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        done.write_text(f"megatron-core=={version}\n", encoding="utf-8")
    return target


SIDE_CONSTRAINTS = REPO_ROOT / "tests" / "conformance" / "constraints"
# The image each transformers pin stands for (the constraint file's transformers line is checked against
# <image>-requirements.txt by tests/conformance/test_runner.py).
IMAGES = ("amd", "nvd")


def transformers_pin(image: str) -> str:
    """The transformers version ``side-<image>.txt`` pins (what the probe must report)."""
    for line in (SIDE_CONSTRAINTS / f"side-{image}.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("transformers=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"side-{image}.txt pins no transformers")


def transformers_env(image: str) -> Path:
    """The directory holding ``image``'s Hugging Face stack (side-<image>.txt), installed on first use."""
    constraints = SIDE_CONSTRAINTS / f"side-{image}.txt"
    digest = hashlib.sha256(constraints.read_bytes()).hexdigest()[:12]
    target = SIDE_ROOT / f"transformers-{image}-{digest}"
    done = target / ".tprimat-complete"
    if done.is_file():
        return target
    if os.environ.get("TPRIMAT_SIDE_ENVS") == "skip":
        pytest.skip(f"TPRIMAT_SIDE_ENVS=skip and the {image} image's transformers is not in {target}")
    SIDE_ROOT.mkdir(exist_ok=True)
    with (SIDE_ROOT / f"transformers-{image}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return target
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--target", str(partial), "-r", str(constraints)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
        if run.returncode != 0:
            pytest.fail(f"cannot install the {image} image's transformers into {partial} ({' '.join(command)}): "
                        f"{run.stderr.strip()[-400:]}; TPRIMAT_SIDE_ENVS=skip skips these tests")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        done.write_text(constraints.read_text(encoding="utf-8"), encoding="utf-8")
    return target


def side_pythonpath(version: str, image: str | None) -> str:
    """PYTHONPATH of a probe: megatron-core ``version``, ``image``'s transformers (None: the .venv's), the repo."""
    parts = [side_env(version)] + ([transformers_env(image)] if image else []) + [REPO_ROOT]
    return os.pathsep.join(str(part) for part in parts)


@dataclass(frozen=True)
class Samples:
    """``[count, SL]`` tokens, labels and loss mask, as a training step receives them."""

    tokens: np.ndarray
    labels: np.ndarray
    loss_mask: np.ndarray


@dataclass(frozen=True)
class ProbeResult:
    samples: Samples
    core_version: str
    core_file: str
    pad: int | None  # the pad id GPTDataset took from the tokenizer (None: no pad)
    transformers_version: str  # what the probe imported (the image's pin, or the virtualenv's)


@dataclass(frozen=True)
class ProbeRequest:
    """One dataset to build: a tokenizer directory, as ``tokenizer`` (``train/settings/sample_probe.py``) loads it."""

    tokenizer: str
    tokenizer_dir: Path
    prefix: Path
    seq_len: int
    seed: int
    num_samples: int
    split: str = "train"  # "valid": the prefix built as --valid-data-path (train/settings/sample_probe.py)
    dataset_samples: int | None = None  # the dataset's size (default: num_samples)


def wheel_samples(version: str, requests: list[ProbeRequest], work: Path,
                  image: str | None = None) -> list[ProbeResult]:
    """Samples ``0..num_samples-1`` of megatron-core ``version``'s ``GPTDataset``, each request read by one reader,
    under ``image``'s transformers (:func:`transformers_env`; None: the virtualenv's)."""
    return wheel_run(version, requests, work, image)[0]


def wheel_run(version: str, requests: list[ProbeRequest], work: Path, image: str | None = None,
              builds: list[list[dict[str, Any]]] | None = None) -> tuple[list[ProbeResult], list[dict[str, Any]]]:
    """:func:`wheel_samples`, and in the same interpreter (one start of torch, megatron-core and transformers
    fewer each) ``builds``: groups of the preflight's own sample requests (``train/settings/sample_probe.py:
    sample_request``), each built as the settings probe builds them (``train/settings/probe_common.py:
    build_samples``); its answer per group, ``samples_built`` or ``samples_error``. Without ``builds`` the probe
    runs as the preflight's sample probe runs, ``python -m train.settings.sample_probe REQUESTS.json``."""
    path = side_pythonpath(version, image)
    work.mkdir(parents=True, exist_ok=True)
    jobs = [{**{key: str(value) if isinstance(value, Path) else value for key, value in vars(request).items()
                if value is not None},
             "cache_dir": str(work / f"index_cache_{index}"), "out": str(work / f"samples_{index}.npz")}
            for index, request in enumerate(requests)]
    (work / "requests.json").write_text(json.dumps(jobs), encoding="utf-8")
    command = [sys.executable, "-m", PROBE_MODULE, str(work / "requests.json")]
    if builds:
        (work / "builds.json").write_text(json.dumps(builds), encoding="utf-8")
        command = [sys.executable, "-m", "tests.helpers.wheel_probe", str(work / "requests.json"),
                   str(work / "builds.json"), str(work / "answers.json")]
    environ = {**os.environ, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=REPO_ROOT, timeout=600,
                         check=False)
    assert run.returncode == 0, (f"dataset probe on megatron-core {version} (transformers: {image or 'the .venv'}) "
                                 f"failed:\n{run.stderr[-3000:]}")
    results = []
    for job in jobs:
        data = np.load(job["out"])
        pad = int(data["pad"])
        results.append(ProbeResult(Samples(data["tokens"], data["labels"], data["loss_mask"]),
                                   str(data["core_version"]), str(data["core_file"]), None if pad == -2 else pad,
                                   str(data["transformers_version"])))
    answers = json.loads((work / "answers.json").read_text(encoding="utf-8")) if builds else []
    return results, answers


def first_difference(ours: Samples, theirs: Samples) -> str | None:
    """Where tokens, labels or loss mask first differ (sample, position, both values, how many); None if equal."""
    found = []
    for name in ("tokens", "labels", "loss_mask"):
        a, b = getattr(ours, name), getattr(theirs, name)
        if a.shape != b.shape:
            found.append(f"{name}: shapes {a.shape} and {b.shape}")
            continue
        where = np.argwhere(a != b)
        if len(where):
            sample, position = (int(v) for v in where[0])
            found.append(f"{name} first at sample {sample}, position {position}: {a[sample, position]} vs "
                         f"{b[sample, position]} ({len(where)} positions in {len(np.unique(where[:, 0]))} samples)")
    return "; ".join(found) or None
