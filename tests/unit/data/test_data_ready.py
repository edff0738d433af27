"""data/ready.py: training refuses a dataset that is not the config's, changed after encoding, or unverified."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data.common import DataError
from data.ready import check_dataset
from tests.helpers.data import SMALL_SAMPLE
from tests.helpers.paths import REPO
from tests.helpers.workload import tiny_environ
from utils.config.load import load_config


def _prefix(data_dir: Path, model: str = "llama") -> Path:
    return data_dir / f"sample-{model}_text_document"


def test_a_verified_dataset_of_this_config_is_ready(data_copy: Path) -> None:
    for model in ("llama", "qwen"):
        assert check_dataset(load_config(), model) == _prefix(data_copy, model)


def test_a_bin_changed_after_encoding_is_refused(data_copy: Path) -> None:
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    tokens[[1, 2]] = tokens[[2, 1]] if tokens[1] != tokens[2] else tokens[[1, 2]] + 1
    tokens.tofile(bin_path)
    with pytest.raises(DataError, match="changed after encoding") as info:
        check_dataset(load_config(), "llama")
    assert str(bin_path) in str(info.value)


def test_no_passing_verification_is_refused(data_copy: Path) -> None:
    Path(f"{_prefix(data_copy)}.verify.json").unlink()
    with pytest.raises(DataError, match=r"data\.verify has not passed"):
        check_dataset(load_config(), "llama")


@pytest.mark.parametrize(("key", "value", "where", "named"), [
    ("SAMPLE_VOCAB", "2048", "sample-llama.manifest.json", "SAMPLE_VOCAB: built with 1024, the config gives 2048"),
    ("SEED", "7", "fetch.manifest.json", "SEED: built with 42, the config gives 7"),
    ("MIN_DOC_CHARS", "30", "clean.manifest.json", "MIN_DOC_CHARS: built with 16, the config gives 30"),
])
def test_other_data_settings_are_refused(data_copy: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str,
                                         where: str, named: str) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(DataError) as info:
        check_dataset(load_config(), "llama")
    assert where in str(info.value) and named in str(info.value)


def test_a_tokenizer_swapped_after_encoding_is_refused(data_copy: Path) -> None:
    tokenizer = data_copy / "tokenizers" / "sample-llama" / "tokenizer_config.json"
    config = json.loads(tokenizer.read_text())
    config["model_max_length"] = 12345
    tokenizer.write_text(json.dumps(config))
    with pytest.raises(DataError, match="encoded with another tokenizer"):
        check_dataset(load_config(), "llama")


def test_the_launcher_refuses_before_training_with_a_failed_result(data_copy: Path, tmp_path: Path) -> None:
    """The same check for every framework, before the job starts; the reason names the file."""
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    with bin_path.open("r+b") as stream:  # same size, one id changed in place
        stream.seek(8)
        old = stream.read(2)
        stream.seek(8)
        stream.write(bytes([old[0] ^ 1, old[1]]))
    env = tiny_environ(data_copy, tmp_path / "out", **SMALL_SAMPLE)
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                           "--model", "llama"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "train.tran.worker" not in proc.stdout, "no trainer was started"
    result = json.loads((tmp_path / "out" / "train_cpu_tran_llama.json").read_text())
    assert result["status"] == "failed"
    assert result["error"].startswith("dataset not usable: ") and str(bin_path) in result["error"]
    dry = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                          "--model", "llama", "--dry-run"], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert dry.returncode == 0 and "changed after encoding" in dry.stdout and "(a real run stops here)" in dry.stdout


def test_a_taken_rendezvous_port_is_one_line_naming_master_port(data_copy: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = tiny_environ(data_copy, tmp_path / "out", **SMALL_SAMPLE, MASTER_PORT=str(port))
        proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                               "--model", "llama"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"tprimat: MASTER_PORT={port} is already in use on this host "
                                                "(another job or service listens there); set MASTER_PORT to a "
                                                "free port"]
    result = json.loads((tmp_path / "out" / "train_cpu_tran_llama.json").read_text())
    assert result["status"] == "failed" and f"MASTER_PORT={port}" in result["error"]


def test_evaluation_needs_the_verified_validation_set(data_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: with evaluation on, the held-out pair is checked too, and its absence is one line."""
    monkeypatch.setenv("EVAL_INTERVAL", "8")
    monkeypatch.setenv("EVAL_SAMPLES", "8")
    monkeypatch.setenv("MBS", "1")
    monkeypatch.setenv("DP", "1")
    monkeypatch.setenv("GA", "8")
    monkeypatch.setenv("GPUS_PER_NODE", "1")
    monkeypatch.setenv("MODEL_SIZE", "tiny")
    cfg = load_config()
    assert check_dataset(cfg, "llama") == _prefix(data_copy)
    valid_bin = data_copy / "sample-llama-valid_text_document.bin"
    valid_bin.unlink()
    with pytest.raises(DataError, match="needs the validation set") as info:
        check_dataset(cfg, "llama")
    assert "\n" not in str(info.value) and str(valid_bin.with_suffix("")) in str(info.value)
    monkeypatch.setenv("EVAL_INTERVAL", "0")
    monkeypatch.setenv("EVAL_SAMPLES", "0")
    assert check_dataset(load_config(), "llama") == _prefix(data_copy)  # evaluation off: not needed
