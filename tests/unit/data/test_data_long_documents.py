"""Long documents are encoded in bounded pieces, exactly, or refused with a clear limit (issue 12).

A 50 MB document encoded at once by the tokenizers library takes about 700 bytes per token
(6.6 GB); data/encoding/long_documents.py cuts such documents at word boundaries. These tests use a
small limit so that the sample tokenizers' documents are "long", and compare with the
``tokenizer(text)`` call Megatron-LM's preprocess_data.py makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data.encoding import long_documents
from data.encoding.long_documents import LongDocumentError, PieceEncoder, pieces
from data.encoding.paths import TokenizerEncoder, _documents_from_lists
from utils.dataset.paths import eod_id, load_tokenizer

LIMIT = 20_000


def corpus_text(data_dir: Path, characters: int) -> str:
    texts = [json.loads(line)["text"] for line in (data_dir / "sample" / "clean.jsonl").open(encoding="utf-8")]
    text = " ".join(texts)
    while len(text) < characters:
        text = f"{text} {text}"
    return text[:characters]


def test_pieces_cut_only_before_a_word_and_keep_every_character() -> None:
    text = "alpha beta,  gamma 12 delta\n epsilon " * 200
    parts = list(pieces(text, limit=100))
    assert "".join(parts) == text and len(parts) > 10
    for part in parts[1:]:
        assert part[0] == " " and part[1].isalnum()
    assert all(len(part) <= 100 for part in parts)
    assert list(pieces("x" * 500, limit=100)) == ["x" * 500]  # no boundary at all: one piece


@pytest.mark.parametrize("model", ["llama", "qwen"])
def test_long_documents_in_pieces_equal_tokenizer_text(built_sample: Path, monkeypatch: pytest.MonkeyPatch,
                                                       model: str) -> None:
    tokenizer = load_tokenizer(built_sample / "tokenizers" / f"sample-{model}")
    monkeypatch.setattr(long_documents, "LONG_DOCUMENT_CHARS", LIMIT)
    monkeypatch.setattr(long_documents, "CHECK_CHARS", 3 * LIMIT)
    monkeypatch.setattr(long_documents, "CHECK_PIECE_CHARS", LIMIT // 4)
    long_text, short_text = corpus_text(built_sample, 9 * LIMIT + 17), "a short document."
    encoder = TokenizerEncoder(tokenizer, eod_id(tokenizer), np.uint16)
    encoder.long = PieceEncoder(tokenizer, encoder.backend, limit=LIMIT)
    tokens, sizes = encoder([short_text, long_text, ""])
    expected_tokens, expected_sizes = _documents_from_lists(
        [list(tokenizer(text)["input_ids"]) for text in (short_text, long_text, "")], eod_id(tokenizer), np.uint16)
    assert encoder.long.checked is True
    assert sizes.tolist() == expected_sizes.tolist() and np.array_equal(tokens, expected_tokens)


def test_a_tokenizer_that_cannot_be_cut_refuses_long_documents_clearly(built_sample: Path) -> None:
    """Mistral's sample tokenizer marks a text's first word differently (SentencePiece-style): pieces differ."""
    tokenizer = load_tokenizer(built_sample / "tokenizers" / "sample-mistral")
    encoder = PieceEncoder(tokenizer, tokenizer.backend_tokenizer, limit=LIMIT)
    text = corpus_text(built_sample, 3 * LIMIT)
    expected = list(tokenizer(text)["input_ids"])
    try:
        got = encoder(text).tolist()
    except LongDocumentError as exc:
        assert f"longer than {LIMIT:,}" in str(exc) and "split such documents" in str(exc)
        assert encoder.checked is False
        with pytest.raises(LongDocumentError):  # the verdict holds for the dataset's later documents
            encoder(text)
    else:  # if this tokenizer can be cut exactly after all, the pieces must give its ids
        assert got == expected
