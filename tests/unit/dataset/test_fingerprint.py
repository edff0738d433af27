"""utils/dataset/fingerprint.py and utils/io/hashing.py: hashes that change exactly when data, tokenizer,
shape or config do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.evaluate import fake_dataset, workload_config
from utils.config.model import REPO_ROOT
from utils.dataset.fingerprint import FLOP_CONVENTION, data_fingerprint, fingerprint, tokenizer_fingerprint
from utils.io.hashing import hash_json, sha256_dir, sha256_file
from utils.spec.models import get_shape


def test_hash_json_ignores_key_order() -> None:
    assert hash_json({"a": 1, "b": [1, 2]}) == hash_json({"b": [1, 2], "a": 1})
    assert hash_json({"a": 1}) != hash_json({"a": 2})


def test_file_and_directory_hashes(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.txt").write_bytes(b"abc")
    (tmp_path / "d" / "sub" / "b.txt").write_bytes(b"def")
    # sha256("abc"), the FIPS 180-2 example
    assert sha256_file(tmp_path / "d" / "a.txt") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    before = sha256_dir(tmp_path / "d")
    (tmp_path / "d" / "sub" / "b.txt").write_bytes(b"deg")
    assert sha256_dir(tmp_path / "d") != before


def test_data_and_tokenizer_hashes_follow_content(tmp_path: Path) -> None:
    prefix_a, tok_a = fake_dataset(tmp_path / "a", "llama", b"one")
    prefix_b, tok_b = fake_dataset(tmp_path / "b", "llama", b"one")
    prefix_c, tok_c = fake_dataset(tmp_path / "c", "llama", b"two", vocab="v2")
    # same bytes in another directory: same hash (paths are recorded but not hashed)
    assert data_fingerprint(prefix_a).hash == data_fingerprint(prefix_b).hash
    assert tokenizer_fingerprint(tok_a).hash == tokenizer_fingerprint(tok_b).hash
    assert data_fingerprint(prefix_a).hash != data_fingerprint(prefix_c).hash
    assert tokenizer_fingerprint(tok_a).hash != tokenizer_fingerprint(tok_c).hash
    data = data_fingerprint(prefix_a)
    assert data.bytes == 300 and data.path == str(prefix_a) and data.files == [f"{prefix_a.name}.idx",
                                                                               f"{prefix_a.name}.bin"]


def test_missing_inputs_give_null_with_reason(tmp_path: Path) -> None:
    missing = data_fingerprint(tmp_path / "nothing")
    assert missing.hash is None and "missing" in missing.reason
    assert data_fingerprint(None).hash is None and data_fingerprint(None).reason == "no dataset prefix given"
    assert tokenizer_fingerprint(tmp_path / "none").hash is None
    (tmp_path / "empty").mkdir()
    assert tokenizer_fingerprint(tmp_path / "empty").reason == "no tokenizer files in directory"


def test_fingerprint_has_every_part_the_fairness_check_compares(tmp_path: Path) -> None:
    prefix, tok = fake_dataset(tmp_path, "qwen")
    cfg = workload_config()
    fp = fingerprint(cfg, get_shape("qwen"), prefix, tok)
    assert fp.flop_convention == FLOP_CONVENTION
    assert fp.config == hash_json(cfg.workload())
    assert fp.data.hash.startswith("sha256:") and fp.tokenizer.hash.startswith("sha256:")
    assert fp.model_shape != fingerprint(cfg, get_shape("llama"), prefix, tok).model_shape
    assert fp.config != fingerprint(workload_config(SL="4096"), get_shape("qwen"), prefix, tok).config
    assert fp.code.commit is not None or fp.code.reason


def test_cli_prints_the_fingerprint(tmp_path: Path) -> None:
    prefix, tok = fake_dataset(tmp_path, "llama")
    proc = subprocess.run([sys.executable, "-m", "utils.dataset.fingerprint", "--model", "llama", "--data-prefix",
                           str(prefix), "--tokenizer-dir", str(tok)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert '"flop_convention"' in proc.stdout and str(prefix) in proc.stdout
