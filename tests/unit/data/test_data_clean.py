"""data/clean.py: normalisation rules, per-rule drop counts, empty-corpus error, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data import clean, fetch
from tests.helpers.data import use_data_env
from utils.config.load import load_config


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("cafe\u0301", "café"),  # NFC recomposition
        ("a\r\nb\rc", "a\nb\nc"),
        ("  a\t\tb\u00a0\u00a0c  ", "a b c"),
        ("one\n\n\n\n\ntwo", "one\n\ntwo"),
        ("zero\u200bwidth\ufeff", "zerowidth"),
        ("line  \n   next", "line\nnext"),
        (" \n\t ", ""),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert clean.normalize(raw) == expected


def _write_local(tmp_path: Path, texts: list[str]) -> Path:
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return source


def test_counts_per_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    long_a = "A document that is certainly long enough."
    other = "Another fine document here."
    texts = [long_a, "", "   ", "short", long_a, "A document  that is certainly long enough.", other]
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{_write_local(tmp_path, texts)}")
    cfg = load_config()
    fetch.fetch_corpus(cfg, progress=False)
    counts = clean.clean(cfg, progress=False)
    assert counts is not None
    assert (counts.input_documents, counts.kept) == (7, 2)
    assert (counts.dropped_empty, counts.dropped_too_short, counts.dropped_duplicate) == (2, 1, 2)
    out = tmp_path / "data" / "local-docs" / "clean.jsonl"
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == [long_a, other]
    manifest = json.loads((out.parent / "clean.manifest.json").read_text())
    assert manifest["counts"]["dropped_duplicate"] == 2
    assert "2 empty, 1 too short" in capsys.readouterr().out


def test_empty_after_cleaning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{_write_local(tmp_path, ['', 'tiny', ' '])}")
    fetch.fetch_corpus(load_config(), progress=False)
    assert clean.main(["--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "empty after cleaning" in err and "2 empty" in err and "1 shorter than MIN_DOC_CHARS=16" in err
    folder = tmp_path / "data" / "local-docs"
    assert not (folder / "clean.jsonl").exists() and not list(folder.glob(".clean.jsonl.tmp-*"))
    assert not (folder / "clean.manifest.json").exists()


def test_missing_raw_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path / "data")
    assert clean.main(["--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "raw.jsonl" in err and "data.fetch" in err


def test_idempotent_force_and_changed_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    texts = ["A document that is long enough to keep.", "Twenty-one characters"]
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{_write_local(tmp_path, texts)}")
    fetch.fetch_corpus(load_config(), progress=False)
    out = tmp_path / "data" / "local-docs" / "clean.jsonl"
    assert clean.main(["--no-progress"]) == 0
    assert len(out.read_text().splitlines()) == 2
    capsys.readouterr()
    assert clean.main(["--no-progress"]) == 0
    assert "is current" in capsys.readouterr().out
    assert clean.main(["--no-progress", "--force"]) == 0
    assert "kept 2 of 2" in capsys.readouterr().out
    assert clean.main(["--no-progress", "--min-chars", "30"]) == 0  # a changed rule redoes the work
    assert len(out.read_text().splitlines()) == 1


def test_held_out_documents_never_reach_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 5 (issue 34): 1 in 50 documents by digest go to valid.jsonl only, the same ones on every run."""
    texts = [f"Document number {i} with enough characters to be kept." for i in range(400)]
    use_data_env(monkeypatch, tmp_path / "data", DATASET=f"local:{_write_local(tmp_path, texts)}")
    cfg = load_config()
    fetch.fetch_corpus(cfg, progress=False)
    counts = clean.clean(cfg, progress=False)
    folder = tmp_path / "data" / "local-docs"
    train, valid = ([json.loads(line)["text"] for line in (folder / name).open()] for name in ("clean.jsonl",
                                                                                              "valid.jsonl"))
    assert counts is not None and counts.held_out == len(valid) and counts.kept == len(train)
    assert 0 < len(valid) < 20 and not set(valid) & set(train) and len(valid) + len(train) == 400
    first = valid
    counts = clean.clean(cfg, force=True, progress=False)
    assert [json.loads(line)["text"] for line in (folder / "valid.jsonl").open()] == first
