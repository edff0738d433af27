"""bench/encode_bench.py: the BookCorpus-shaped corpus, and one tiny run of every method (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.encode_bench import split_sentences, write_sentence_corpus


def test_split_sentences_on_every_sample_ending() -> None:
    text = 'Hello there. "Quoted one!" Next, one... Semi; then a question?\n\nNew paragraph, no end'
    assert split_sentences(text) == [
        "Hello there.", '"Quoted one!"', "Next, one...", "Semi;", "then a question?", "New paragraph, no end",
    ]


def test_split_sentences_keeps_inner_punctuation_and_drops_blank_documents() -> None:
    assert split_sentences("Pi is 3.14, café, São Paulo.") == ["Pi is 3.14, café, São Paulo."]
    assert split_sentences("   \n\t") == []
    assert split_sentences("") == []


def test_write_sentence_corpus_keeps_order_and_all_text(tmp_path: Path) -> None:
    documents = ["One. Two!", "", "Three?\n\nFour \"five.\" Six"]
    source = tmp_path / "raw.jsonl"
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in documents), encoding="utf-8")
    out = tmp_path / "sentences" / "raw.jsonl"
    assert write_sentence_corpus(source, out) == 5
    rows = [json.loads(line)["text"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows == ["One.", "Two!", "Three?", 'Four "five."', "Six"]
    assert not list(out.parent.glob(".*tmp*")), "no temporary file may be left behind"


def test_bench_reports_both_paths_and_their_ceilings(tmp_path: Path, monkeypatch) -> None:
    """A tiny end-to-end run: figures for every method (never asserted: they are measurements), outputs identical."""
    from bench.encode_bench import main
    from tests.helpers_data import use_data_env

    use_data_env(monkeypatch, tmp_path / "unused")
    out = tmp_path / "figures.json"
    assert main(["--sample-mb", "0.1", "--repeats", "1", "--workers", "2", "--work-dir", str(tmp_path / "work"),
                 "--json", str(out)]) == 0
    summary = json.loads(out.read_text(encoding="utf-8"))
    assert summary["byte_identical"] is True and summary["path_chosen"] == "tiktoken"
    for method in ("baseline", "tprimat", "tprimat-tokenizers", "tokenizers_alone", "tiktoken_alone"):
        assert summary[method]["best_tokens_per_s"] > 0 and len(summary[method]["runs_tokens_per_s"]) == 1
    assert summary["baseline"]["ratio_vs_baseline"] == 1.0
    assert summary["tokens"] > 0 and summary["documents"] > 0 and len(summary["path_setup_seconds"]) == 1
