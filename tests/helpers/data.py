"""Helpers for the data-pipeline tests: an isolated config environment and a tiny sample build."""

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


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified tiny sample build (both models), made once per test module; copy it before changing it."""
    data_dir = tmp_path_factory.mktemp("data-sample")
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_data_env(monkeypatch, data_dir)
        run_all_stages()
    return data_dir


@pytest.fixture
def data_copy(built_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the module's sample build, with the config pointed at it: free to change."""
    data_dir = copy_tree(built_sample, tmp_path / "data")
    use_data_env(monkeypatch, data_dir)
    return data_dir
