"""data/fetch.py offline: sample determinism, local inputs, faked Hub streaming/downloads, HF_TOKEN errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from data import fetch
from tests.helpers.data import use_data_env
from utils.config.secret import read_secret
from utils.dataset.paths import load_tokenizer


def _texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_unknown_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path, DATASET="wikipedia")
    assert fetch.main(["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "DATASET='wikipedia'" in err and "bc, c4, sample" in err
    assert not any(tmp_path.iterdir())


def test_sample_is_deterministic_and_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path, SAMPLE_MB="0.1", MODELS="qwen", SAMPLE_VOCAB="512")
    assert fetch.main(["--no-progress"]) == 0
    raw = tmp_path / "sample" / "raw.jsonl"
    tok_json = tmp_path / "tokenizers" / "sample-qwen" / "tokenizer.json"
    first_raw, first_tok = raw.read_bytes(), tok_json.read_bytes()
    texts = _texts(raw)
    assert len(texts) > 20
    assert len({len(t) for t in texts}) > 10  # varied document lengths
    assert any(not t.isascii() for t in texts)  # multi-byte UTF-8 for byte-level BPE
    capsys.readouterr()
    assert fetch.main(["--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "is current" in out and "tokenizer" in out
    assert fetch.main(["--no-progress", "--force"]) == 0
    assert raw.read_bytes() == first_raw and tok_json.read_bytes() == first_tok
    monkeypatch.setenv("SEED", "7")
    assert fetch.main(["--no-progress"]) == 0
    assert raw.read_bytes() != first_raw


def test_local_jsonl_text_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_text('{"text": "first doc"}\n{"text": "second doc"}\n', encoding="utf-8")
    (corpus / "b.txt").write_text("para one\nline two\n\n\npara two\n", encoding="utf-8")
    (corpus / "ignored.bin").write_bytes(b"\xff\xfe")
    monkeypatch.setattr(fetch, "download_tokenizer_files", lambda repo, dest, token: None)
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{corpus}", MODELS="qwen")
    # the faked download installs nothing: the corpus is written, then the tokenizer check fails cleanly
    assert fetch.main(["--no-progress"]) == 1
    raw = tmp_path / "data" / "local-corpus" / "raw.jsonl"
    assert _texts(raw) == ["first doc", "second doc", "para one\nline two\n", "para two\n"]
    assert not (tmp_path / "data" / "tokenizers" / "qwen").exists()


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b'{"text": "ok"}\n{not json}\n', "bad.jsonl:2: not valid JSON"),
     (b'{"body": "no text field"}\n', "bad.jsonl:1: expected an object with a string 'text' field"),
     (b"\xff\xfe\x00garbage", "not UTF-8")],
)
def test_unreadable_local_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str], content: bytes, problem: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{bad}")
    assert fetch.main(["--no-progress"]) == 1
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "data" / "local-bad" / "raw.jsonl").exists()
    assert not list((tmp_path / "data" / "local-bad").glob(".raw.jsonl.tmp-*"))


def test_missing_local_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{tmp_path / 'nope.jsonl'}")
    assert fetch.main(["--no-progress"]) == 1
    assert "nope.jsonl does not exist" in capsys.readouterr().err


def _fake_download_from(source: Path):
    calls: list[tuple[str, str | None]] = []

    def download(repo: str, destination: Path, token: str | None) -> None:
        calls.append((repo, token))
        for file in source.iterdir():
            shutil.copy(file, destination / file.name)
        (destination / ".cache").mkdir()

    return download, calls


def test_hub_dataset_streaming_and_tokenizer_download(built_sample: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    records = ({"text": f"document number {i}", "url": "x"} for i in range(100))
    opened: list[fetch.HubDataset] = []

    def fake_stream(source: fetch.HubDataset):
        opened.append(source)
        return records

    download, calls = _fake_download_from(built_sample / "tokenizers" / "sample-qwen")
    monkeypatch.setattr(fetch, "open_hub_stream", fake_stream)
    monkeypatch.setattr(fetch, "download_tokenizer_files", download)
    use_data_env(monkeypatch, tmp_path, DATASET="c4", DATA_SAMPLES="5", MODELS="qwen")
    assert fetch.main(["--no-progress"]) == 0
    # the training split, then C4's own validation split (issue 34), one document per 50 (at least one)
    assert opened == [fetch.HUB_DATASETS["c4"], fetch.VALIDATION_SPLITS["c4"]] and opened[1].split == "validation"
    assert opened[0].repo == "allenai/c4" and opened[0].config == "en"
    assert _texts(tmp_path / "c4" / "raw.jsonl") == [f"document number {i}" for i in range(5)]
    assert _texts(tmp_path / "c4" / "valid_raw.jsonl") == ["document number 5"]  # the fake's one stream goes on
    assert calls == [("Qwen/Qwen2.5-7B", None)]
    tok_dir = tmp_path / "tokenizers" / "qwen"
    assert not (tok_dir / ".cache").exists()
    assert load_tokenizer(tok_dir).eos_token == "<|endoftext|>"
    assert fetch.main(["--no-progress"]) == 0  # current: neither streamed nor downloaded again
    assert len(opened) == 2 and len(calls) == 1


def test_empty_hub_stream_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(fetch, "open_hub_stream", lambda source: iter(()))
    use_data_env(monkeypatch, tmp_path, DATASET="bc", MODELS="qwen")
    assert fetch.main(["--no-progress"]) == 1
    assert "produced no documents" in capsys.readouterr().err
    assert not (tmp_path / "bc" / "raw.jsonl").exists()


def _no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.env"
    monkeypatch.setattr(fetch, "read_secret",
                        lambda name: read_secret(name, secrets_file=secrets))


def test_gated_llama_without_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _no_secrets(tmp_path, monkeypatch)
    monkeypatch.setattr(fetch, "open_hub_stream", lambda source: iter([{"text": "a document of some length"}]))
    download, calls = _fake_download_from(tmp_path)
    monkeypatch.setattr(fetch, "download_tokenizer_files", download)
    use_data_env(monkeypatch, tmp_path / "data", DATASET="bc", MODELS="llama")
    assert fetch.main(["--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "meta-llama/Llama-3.1-8B" in err and "HF_TOKEN" in err and "secrets.env" in err
    assert calls == []


def test_download_error_never_prints_the_token(built_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    token = "hf_THISISASECRETTOKEN123"

    def failing(repo: str, destination: Path, used: str | None) -> None:
        raise PermissionError(f"401 Unauthorized for {repo} with Authorization: Bearer {used}")

    monkeypatch.setattr(fetch, "open_hub_stream", lambda source: iter([{"text": "a document of some length"}]))
    monkeypatch.setattr(fetch, "download_tokenizer_files", failing)
    use_data_env(monkeypatch, tmp_path / "data", DATASET="bc", MODELS="llama")
    monkeypatch.setenv("HF_TOKEN", token)
    assert fetch.main(["--no-progress"]) == 1
    captured = capsys.readouterr()
    assert token not in captured.err + captured.out
    assert "cannot download the tokenizer of meta-llama/Llama-3.1-8B" in captured.err
    assert not (tmp_path / "data" / "tokenizers" / "llama").exists()
    assert not list((tmp_path / "data" / "tokenizers").glob(".llama.tmp-*"))
