"""data/verify.py rejects every kind of broken dataset with the file and the problem named."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from data import verify


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


def _resign(prefix: Path) -> None:
    """Record the current .bin/.idx in the encode manifest, as an encoder that wrote these bytes would."""
    from utils.io.hashing import sha256_file

    manifest_path = Path(f"{prefix}.manifest.json")
    manifest = json.loads(manifest_path.read_text())
    for suffix in (".bin", ".idx"):
        path = Path(f"{prefix}{suffix}")
        manifest["outputs"][path.name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest_path.write_text(json.dumps(manifest))


def test_bin_edited_in_place_is_caught_by_its_hash(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same size, in-vocabulary ids, EOD intact: only the manifest's sha256 can tell (issue 12)."""
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    i = next(i for i in range(1, 100) if tokens[i] != tokens[i + 1])
    tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]  # two ids of the first document swapped
    tokens.tofile(bin_path)
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert str(bin_path) in err and "changed after encoding" in err
    assert not Path(f"{_prefix(data_copy)}.verify.json").exists(), "a failed pair keeps no report of an old pass"
    assert Path(f"{_prefix(data_copy, 'qwen')}.verify.json").exists()


def test_other_data_settings_are_reported(data_copy: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIN_DOC_CHARS", "40")
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert "clean.manifest.json" in err and "other data settings" in err
    assert "MIN_DOC_CHARS: built with 16, the config gives 40" in err
    monkeypatch.setenv("MIN_DOC_CHARS", "16")
    monkeypatch.setenv("SAMPLE_MB", "0.4")
    assert verify.main(["--model", "llama"]) == 1, "also when the pair itself is unchanged"
    assert "SAMPLE_MB: built with 0.3, the config gives 0.4" in capsys.readouterr().err


def test_reverification_hashes_nothing_again(data_copy: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import utils.io.hash_cache

    assert verify.main(["--force", "--model", "llama"]) == 0
    hashed: list[str] = []
    real = utils.io.hash_cache.sha256_file
    monkeypatch.setattr(utils.io.hash_cache, "sha256_file",
                        lambda path: hashed.append(Path(path).name) or real(path))
    assert verify.main(["--force", "--model", "llama"]) == 0
    assert not [name for name in hashed if name.endswith((".bin", ".idx"))], hashed
    capsys.readouterr()


def test_token_id_outside_vocabulary(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{_prefix(data_copy)}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    tokens[5] = 60000  # same size: an encoder that wrote it would also have recorded its hash
    tokens.tofile(bin_path)
    _resign(_prefix(data_copy))
    code, err = _run_verify(capsys, "llama")
    assert code == 1
    assert str(bin_path) in err and "token id 60000 at position 5" in err


def test_document_without_eod(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{_prefix(data_copy, 'qwen')}.bin")
    tokens = np.fromfile(bin_path, dtype=np.uint16)
    tokens[-1] = 100
    tokens.tofile(bin_path)
    _resign(_prefix(data_copy, "qwen"))
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
