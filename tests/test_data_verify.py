"""data/verify.py rejects every kind of broken dataset with the file and the problem named."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from data import verify
from tests.helpers_data import built_sample, copy_tree, use_data_env

__all__ = ["built_sample"]


@pytest.fixture
def data_copy(built_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data_dir = copy_tree(built_sample, tmp_path / "data")
    use_data_env(monkeypatch, data_dir)
    return data_dir


def _prefix(data_dir: Path, model: str = "llama") -> Path:
    return data_dir / f"sample-{model}_text_document"


def _run_verify(capsys: pytest.CaptureFixture[str], *models: str) -> tuple[int, str]:
    argv = ["--force"] + [arg for model in models for arg in ("--model", model)]
    code = verify.main(argv)
    return code, capsys.readouterr().err


def test_intact_datasets_pass_and_report(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_verify(capsys)
    assert code == 0, err
    report = verify.mf.read_manifest(Path(f"{_prefix(data_copy)}.verify.json"))
    assert report["counts"]["documents"] > 50
    assert report["counts"]["dtype"] == "uint16"
    assert len(report["counts"]["round_trip_documents"]) == verify.ROUND_TRIP_SAMPLES


def test_truncated_bin(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    bin_path.write_bytes(bin_path.read_bytes()[:-10])
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert str(bin_path) in err and "truncated" in err


@pytest.mark.parametrize(
    ("offset", "payload", "problem"),
    [
        (0, b"NOTANIDX\x00", "wrong magic"),
        (9, struct.pack("<Q", 2), "version 2"),
        (17, struct.pack("<B", 99), "unknown dtype code 99"),
        (17, struct.pack("<B", 4), "needs uint16"),  # int32 code for a 1k vocabulary
    ],
)
def test_corrupt_index_header(data_copy: Path, capsys: pytest.CaptureFixture[str], offset: int, payload: bytes,
                              problem: str) -> None:
    idx_path = Path(f"{_prefix(data_copy)}.idx")
    raw = bytearray(idx_path.read_bytes())
    raw[offset:offset + len(payload)] = payload
    idx_path.write_bytes(bytes(raw))
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert str(idx_path) in err and problem in err


def test_token_id_outside_vocabulary(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    tokens[5] = 60000  # same size, so only the id check can catch it
    tokens.tofile(bin_path)
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert str(bin_path) in err and "token id 60000 at position 5" in err


def test_document_without_eod(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{_prefix(data_copy, 'qwen')}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    tokens[-1] = 100
    tokens.tofile(bin_path)
    code, err = _run_verify(capsys, "qwen")
    assert code == 1
    assert "do not end in EOD" in err


def test_stale_pair_after_clean_changed(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = data_copy / "sample" / "clean.jsonl"
    clean.write_text(clean.read_text(encoding="utf-8") + '{"text": "one more document, long enough"}\n',
                     encoding="utf-8")
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert "stale" in err


def test_missing_tokenizer_dir(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    shutil.rmtree(data_copy / "tokenizers" / "sample-llama")
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert "sample-llama" in err and "run_data.sh" in err


def test_unchanged_pair_is_not_rechecked(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert verify.main(["--model", "llama"]) == 0
    assert "unchanged since it passed" in capsys.readouterr().out


def test_a_document_lost_by_encode_is_caught(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pair missing clean.jsonl's last document, with an encode manifest that agrees with the pair
    (as an encode that silently dropped it would write): the sampled round trips all still match, so
    only a count taken from clean.jsonl itself can catch it."""
    from data import encode

    clean = data_copy / "sample" / "clean.jsonl"
    original = clean.read_bytes()
    lines = original.splitlines(keepends=True)
    clean.write_bytes(b"".join(lines[:-1]))
    assert encode.main(["--force", "--model", "llama", "--no-progress"]) == 0
    clean.write_bytes(original)
    manifest_path = encode.encode_manifest_path(_prefix(data_copy))
    manifest = verify.mf.read_manifest(manifest_path)
    manifest["key"]["clean_sha256"] = verify.sha256_file(clean)
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert f"{len(lines) - 1} documents, but {clean} holds {len(lines)}" in err
