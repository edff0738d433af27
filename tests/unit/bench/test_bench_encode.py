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


def test_quick_mode_reports_tprimats_whole_process_figures(tmp_path: Path, monkeypatch) -> None:
    """--quick: one tiny pair, no tree; every figure of tprimat's side measured, Megatron's null with the reason."""
    from bench.encode_bench import main
    from tests.helpers.data import use_data_env

    use_data_env(monkeypatch, tmp_path / "unused")
    monkeypatch.delenv("TPRIMAT_MEGATRON_LM", raising=False)
    out = tmp_path / "figures.json"
    assert main(["--quick", "--work-dir", str(tmp_path / "work"), "--json", str(out)]) == 0
    summary = json.loads(out.read_text(encoding="utf-8"))
    ours = summary["tprimat"]
    assert summary["pairs"] == 1 and summary["workers"] == 2 and summary["tokens"] > 0 and summary["documents"] > 0
    assert ours["wall_s_median"] > 0 and ours["cpu_s_median"] > 0 and ours["tokens_per_s"] > 0
    assert ours["startup_wall_s_median"] > 0 and 0 < ours["startup_share"] <= 1
    assert len(ours["wall_s_runs"]) == 1 and len(summary["load_average_before_after"]) == 2
    assert summary["megatron"] is None and "no Megatron-LM tree" in summary["megatron_reason"]
    assert summary["speedup_wall"] is None and summary["byte_identical"] is None
    manifest = json.loads((tmp_path / "work" / "data" / "sample-llama_text_document.manifest.json").read_text())
    assert manifest["token_policy"]["policy"] == "megatron" and manifest["counts"]["tokens"] == summary["tokens"]


def test_a_tree_without_the_tool_is_a_usage_error(tmp_path: Path, capsys) -> None:
    import pytest

    from bench.encode_bench import main

    with pytest.raises(SystemExit) as exited:
        main(["--megatron-lm", str(tmp_path), "--work-dir", str(tmp_path / "work")])
    assert exited.value.code == 2 and "no tools/preprocess_data.py" in capsys.readouterr().err
