"""evaluate/fingerprint.py: hashes that change exactly when data, tokenizer, shape or config change."""

from __future__ import annotations

from pathlib import Path

from helpers_evaluate import fake_dataset, workload_config

from evaluate.fingerprint import FLOP_CONVENTION, data_fingerprint, fingerprint, hash_json, tokenizer_fingerprint
from utils.models import get_shape


def test_hash_json_ignores_key_order() -> None:
    assert hash_json({"a": 1, "b": [1, 2]}) == hash_json({"b": [1, 2], "a": 1})
    assert hash_json({"a": 1}) != hash_json({"a": 2})


def test_data_and_tokenizer_hashes_follow_content(tmp_path: Path) -> None:
    prefix_a, tok_a = fake_dataset(tmp_path / "a", "llama", b"one")
    prefix_b, tok_b = fake_dataset(tmp_path / "b", "llama", b"one")
    prefix_c, tok_c = fake_dataset(tmp_path / "c", "llama", b"two", vocab="v2")
    # same bytes in another directory: same hash (paths are recorded but not hashed)
    assert data_fingerprint(prefix_a)["hash"] == data_fingerprint(prefix_b)["hash"]
    assert tokenizer_fingerprint(tok_a)["hash"] == tokenizer_fingerprint(tok_b)["hash"]
    assert data_fingerprint(prefix_a)["hash"] != data_fingerprint(prefix_c)["hash"]
    assert tokenizer_fingerprint(tok_a)["hash"] != tokenizer_fingerprint(tok_c)["hash"]
    assert data_fingerprint(prefix_a)["bin_bytes"] == 300


def test_missing_inputs_give_null_with_reason(tmp_path: Path) -> None:
    missing = data_fingerprint(tmp_path / "nothing")
    assert missing["hash"] is None and "missing" in missing["reason"]
    assert data_fingerprint(None) == {"hash": None, "reason": "no dataset prefix given"}
    assert tokenizer_fingerprint(tmp_path / "none")["hash"] is None
    (tmp_path / "empty").mkdir()
    assert tokenizer_fingerprint(tmp_path / "empty")["reason"] == "no tokenizer files in directory"


def test_fingerprint_has_every_part_the_fairness_check_compares(tmp_path: Path) -> None:
    prefix, tok = fake_dataset(tmp_path, "qwen")
    cfg = workload_config()
    fp = fingerprint(cfg, get_shape("qwen"), prefix, tok)
    assert set(fp) == {"config", "model_shape", "data", "tokenizer", "flop_convention", "code"}
    assert fp["flop_convention"] == FLOP_CONVENTION
    assert fp["config"] == hash_json(cfg.workload())
    assert fp["model_shape"] != fingerprint(cfg, get_shape("llama"), prefix, tok)["model_shape"]
    assert fp["config"] != fingerprint(workload_config(SL="4096"), get_shape("qwen"), prefix, tok)["config"]
    assert "commit" in fp["code"]
