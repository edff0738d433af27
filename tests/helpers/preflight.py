"""Helpers for the preflight tests: the recording stand-ins of tests/fakes/ wired as the frameworks.

The stand-ins are copied into ``tmp_path`` (the Megatron-LM one with the commit file the
Dockerfiles write, so the MEGATRON_REF check runs as in an image) and the variables
``train/launch/preflight.py`` reads are pointed at them; the probes run in this interpreter.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.helpers.megatron import make_config
from tests.helpers.nemo import make_tokenizer
from tests.helpers.paths import FAKES
from train.rules.versions import RECORDED_COMMIT_FILE
from utils.config.model import Config

FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_megatron(root: Path, ref: str = FAKE_COMMIT) -> Path:
    tree = root / "megatron-lm"
    shutil.copytree(FAKES / "megatron_lm", tree)
    (tree / RECORDED_COMMIT_FILE).write_text(f"{ref} {FAKE_COMMIT}\n", encoding="utf-8")
    return tree


def fake_primus(root: Path) -> Path:
    tree = root / "primus"
    shutil.copytree(FAKES / "primus", tree)
    shutil.copytree(FAKES / "megatron_lm", tree / "third_party" / "Megatron-LM")
    return tree


def point_at_fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every framework variable the preflight reads pointed at a stand-in; returns the record file.

    A config for these stand-ins needs ``MEGATRON_REF=FAKE_COMMIT``.
    """
    record = tmp_path / "record.json"
    monkeypatch.setenv("TPRIMAT_MEGATRON_LM", str(fake_megatron(tmp_path)))
    monkeypatch.setenv("TPRIMAT_PRIMUS", str(fake_primus(tmp_path)))
    monkeypatch.setenv("TPRIMAT_MEGATRON_PYTHON", sys.executable)
    monkeypatch.setenv("TPRIMAT_NEMO_PYTHON", str(FAKES / "nemo_python"))
    monkeypatch.setenv("TPRIMAT_FAKE_REAL_PYTHON", sys.executable)
    monkeypatch.setenv("TPRIMAT_FAKE_RECORD", str(record))
    for key in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN", "TPRIMAT_FAKE_REJECT",
                "TPRIMAT_FAKE_INIT_MULTIPLIER", "TPRIMAT_FAKE_NO_CONFIG", "TPRIMAT_FAKE_NO_FUSED_ROPE"):
        monkeypatch.delenv(key, raising=False)
    return record


def use_fakes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **config: str) -> tuple[Config, Path]:
    """Every framework variable pointed at a stand-in; a config with data under ``tmp_path``; the record file."""
    record = point_at_fakes(monkeypatch, tmp_path)
    cfg = make_config(tmp_path, MEGATRON_REF=FAKE_COMMIT, DATASET="sample", TRAIN_ITERS="20", WARMUP_STEPS="4",
                      **config)
    for model in ("llama", "qwen"):
        make_tokenizer(cfg.data_dir / "tokenizers" / f"sample-{model}", 300)
    return cfg, record


def recorded(record: Path) -> dict:
    return json.loads(record.read_text(encoding="utf-8"))
