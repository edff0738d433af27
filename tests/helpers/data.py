"""Helpers for the data-pipeline tests: an isolated config environment and a tiny sample build.

The fixtures built on them (``built_sample``, ``data_copy``) are tests/unit/data/conftest.py's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

SMALL_SAMPLE = {"DATASET": "sample", "SAMPLE_MB": "0.3", "SAMPLE_VOCAB": "1024", "MODELS": "llama qwen mistral",
                "ENCODE_WORKERS": "2", "SEED": "42", "MIN_DOC_CHARS": "16"}


def use_data_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path, **overrides: str) -> None:
    """Point load_config() at the repo's config.env with DATA_DIR in a temp dir; never the network."""
    monkeypatch.setenv("TPRIMAT_CONFIG", str(REPO / "config.env"))
    monkeypatch.setenv("DATA_DIR", str(data_dir))
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for key, value in {**SMALL_SAMPLE, **overrides}.items():
        monkeypatch.setenv(key, value)


def run_all_stages(*extra: str) -> None:
    """fetch -> clean -> encode -> verify in-process; fails the test on the first non-zero exit."""
    from data import clean, encode, fetch, verify

    for stage in (fetch, clean, encode, verify):
        code = stage.main(["--no-progress", *extra])
        assert code == 0, f"{stage.__name__} exited {code}"


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target
