"""data/encoding/fast_bpe.py and data/encoding/check.py: what the fast path accepts, refuses, and how its check sees."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench.llama3_tokenizer import write_llama3_tokenizer
from data.encoding.check import adversarial_texts, dataset_sample, first_difference, split_difference
from data.encoding.fast_bpe import DOCUMENT_BREAK, FastBpe, NotExpressible, Wrapping, byte_level_alphabet, check_merges
from tests.helpers.tokenizers import copy_tokenizer, edit_tokenizer_json, tiny_byte_level_bpe
from utils.dataset.paths import load_tokenizer


@pytest.fixture(scope="module")
def llama3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    directory = write_llama3_tokenizer(tmp_path_factory.mktemp("llama3") / "llama3")
    return directory, load_tokenizer(directory)


@pytest.fixture(scope="module")
def llama3_fast(llama3: tuple[Path, object]) -> FastBpe:
    """The fast path of the real Llama 3 tokenizer, built once (about 1 s of CPU a build); never changed by a test."""
    directory, tokenizer = llama3
    return FastBpe.from_tokenizer(tokenizer, directory / "tokenizer.json")


def _fast(directory: Path) -> tuple[object, FastBpe]:
    tokenizer = load_tokenizer(directory)
    return tokenizer, FastBpe.from_tokenizer(tokenizer, directory / "tokenizer.json")


def test_byte_level_alphabet_is_the_tokenizers_one() -> None:
    from tokenizers import pre_tokenizers

    alphabet = byte_level_alphabet()
    assert sorted(alphabet) == list(range(256))
    assert set(alphabet.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ" and alphabet[ord("A")] == "A"


def test_real_llama3_file_is_expressible(llama3: tuple[Path, object], llama3_fast: FastBpe) -> None:
    _, tokenizer = llama3
    fast = llama3_fast
    assert fast.encoding.n_vocab == 128257  # 128,000 ranks, 256 added tokens, the document separator
    assert fast.whole_words and not fast.nfc and len(fast.specials) == 256
    assert Wrapping.of(tokenizer) == Wrapping(prefix=(128000,), suffix=())
    text = "Hello world, it's 2024!\n\n  Zürich 東京 🙂<|end_of_text|>"
    assert [128000, *fast.encode(text)] == tokenizer(text)["input_ids"]


@pytest.mark.parametrize(("model", "prefix"), [("llama", True), ("qwen", False)])
def test_sample_tokenizers_are_expressible(built_sample: Path, model: str, prefix: bool) -> None:
    tokenizer, fast = _fast(built_sample / "tokenizers" / f"sample-{model}")
    assert fast.nfc is (model == "qwen") and not fast.whole_words
    assert Wrapping.of(tokenizer).prefix == ((tokenizer.bos_token_id,) if prefix else ())


def test_the_check_passes_on_the_real_llama3_and_a_dataset_sample(built_sample: Path, llama3: tuple[Path, object],
                                                                  llama3_fast: FastBpe) -> None:
    _, tokenizer = llama3
    fast = llama3_fast
    sample = dataset_sample(built_sample / "sample" / "clean.jsonl", count=16, seed=1)
    assert first_difference(tokenizer, fast, Wrapping.of(tokenizer), sample, adversarial_texts(fast.specials)) is None


@pytest.mark.parametrize(("code_point", "klass"), [(0x0915, "L"), (0x4E00, "L"), (0x0660, "N"), (0x00B2, "N"),
                                                   (0x3000, "s"), (0x2028, "s"), (0x1D7D9, "N")])
def test_a_regex_engine_disagreeing_on_one_code_point_is_caught(llama3: tuple[Path, object], llama3_fast: FastBpe,
                                                                 code_point: int, klass: str) -> None:
    """As if tiktoken's Unicode tables left one code point out of a class the tokenizer's engine puts it in."""
    _, tokenizer = llama3
    written = r"\s" if klass == "s" else rf"\p{{{klass}}}"
    # a copy with the changed pattern: the module's build stays as the file gives it
    fast = dataclasses.replace(llama3_fast, pattern=llama3_fast.pattern.replace(
        written, rf"[{written}&&[^\x{{{code_point:04X}}}]]"))
    assert fast.pattern != llama3_fast.pattern
    reason = split_difference(tokenizer, fast, adversarial_texts(fast.specials))
    assert reason is not None and "cuts text" in reason


def test_the_split_probe_passes_when_the_pattern_is_the_same(llama3: tuple[Path, object],
                                                            llama3_fast: FastBpe) -> None:
    _, tokenizer = llama3
    fast = llama3_fast
    assert split_difference(tokenizer, fast, adversarial_texts(fast.specials)) is None


def test_bpe_differences_are_caught(tmp_path: Path) -> None:
    """bc merges before ab, and no merge joins a + bc, yet abc is a token; tiktoken merges any pair forming a token.

    Without ``ignore_merges`` the token abc alone already differs (the tokenizer gives a + bc).
    With it, abc alone agrees, but abcd still differs: the tokenizer gives a + bc + d, tiktoken abc + d.
    """
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]
    tokenizer, fast = _fast(tiny_byte_level_bpe(tmp_path / "tok", merges))
    reason = first_difference(tokenizer, fast, Wrapping.of(tokenizer), ["xx abc"], [])
    assert reason is not None and "b'abc' alone does not merge back into itself" in reason
    tokenizer, fast = _fast(tiny_byte_level_bpe(tmp_path / "whole", merges, ignore_merges=True))
    assert first_difference(tokenizer, fast, Wrapping.of(tokenizer), ["xx abc"], []) is None
    reason = first_difference(tokenizer, fast, Wrapping.of(tokenizer), ["xx abc", "abcd"], [])
    assert reason is not None and reason.startswith("dataset text 1 ('abcd'")
    assert "gives [97, 256, 100], the fast path [258, 100]" in reason


def test_one_differing_document_is_enough(built_sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer, fast = _fast(built_sample / "tokenizers" / "sample-qwen")
    sample = dataset_sample(built_sample / "sample" / "clean.jsonl", count=8)
    original = fast.encode_batch

    def one_token_off(texts):
        ids, lengths = original(texts)
        ids = ids.copy()
        ids[-1] = (ids[-1] + 1) % 256
        return ids, lengths

    monkeypatch.setattr(fast, "encode_batch", one_token_off)
    reason = first_difference(tokenizer, fast, Wrapping.of(tokenizer), sample, [])
    assert reason is not None and reason.startswith("dataset text") and "batch" in reason


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda spec: spec["model"]["merges"].append("Ġzzq qqzx"), "references the unknown token"),
    (lambda spec: spec["model"]["merges"].insert(0, spec["model"]["merges"].pop(40)),
     "merge order and token ids disagree"),
    (lambda spec: spec["model"]["vocab"].update({"not byte-level": spec["model"]["vocab"].pop("th")}),
     "is not in the byte-level alphabet"),
    (lambda spec: spec["model"]["vocab"].update({"Ġzzq": 99999}), "has 1025 tokens, the loaded tokenizer 1024"),
])
def test_inconsistent_files_are_refused_with_the_reason(built_sample: Path, tmp_path: Path, edit, expected) -> None:
    """The file is edited after loading, as if tokenizer.json no longer matched what was loaded."""
    directory = copy_tokenizer(built_sample / "tokenizers" / "sample-llama", tmp_path / "tok")
    tokenizer = load_tokenizer(directory)
    edit_tokenizer_json(directory, edit)
    with pytest.raises(NotExpressible, match=expected):
        FastBpe.from_tokenizer(tokenizer, directory / "tokenizer.json")


def test_a_pattern_tiktoken_cannot_compile_is_refused(built_sample: Path, tmp_path: Path) -> None:
    r"""``\X`` (a grapheme cluster) is Oniguruma syntax the tokenizers library accepts and tiktoken's engine rejects."""
    def grapheme_split(spec: dict) -> None:
        spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\X"

    directory = copy_tokenizer(built_sample / "tokenizers" / "sample-llama", tmp_path / "tok", grapheme_split)
    with pytest.raises(NotExpressible, match="tiktoken rejects the split pattern"):
        _fast(directory)


def test_unreadable_or_missing_file_is_refused(built_sample: Path, tmp_path: Path) -> None:
    tokenizer = load_tokenizer(built_sample / "tokenizers" / "sample-llama")
    with pytest.raises(NotExpressible, match=r"no tokenizer\.json"):
        FastBpe.from_tokenizer(tokenizer, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(NotExpressible, match="cannot read"):
        FastBpe.from_tokenizer(tokenizer, tmp_path / "tokenizer.json")


def test_check_merges_accepts_both_merge_formats() -> None:
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}
    check_merges(vocab, ["a b", "ab c"])
    check_merges(vocab, [["a", "b"], ["ab", "c"]])
    with pytest.raises(NotExpressible, match="is not two tokens"):
        check_merges(vocab, ["a b", "abc"])


def test_documents_get_the_tokenizers_wrapping_and_eod_but_empty_ones_stay_empty() -> None:
    ids = np.array([5, 6, 7, 8], dtype=np.uint32)
    lengths = np.array([2, 0, 2])
    tokens, sizes = Wrapping(prefix=(1,), suffix=(2,)).documents(ids, lengths, eod=9, dtype=np.uint16)
    assert tokens.tolist() == [1, 5, 6, 2, 9, 1, 2, 9, 1, 7, 8, 2, 9] and sizes.tolist() == [5, 3, 5]
    tokens, sizes = Wrapping(prefix=(), suffix=()).documents(ids, lengths, eod=9, dtype=np.int32)
    assert tokens.tolist() == [5, 6, 9, 7, 8, 9] and sizes.tolist() == [3, 0, 3]


def test_batch_and_per_document_encoding_agree_on_awkward_documents(built_sample: Path,
                                                                    llama3: tuple[Path, object],
                                                                    llama3_fast: FastBpe) -> None:
    """Special tokens in the text, the separator itself, NFC changes next to a special token, empty text."""
    texts = ["plain text", f"has the separator {DOCUMENT_BREAK} inside", "", "<|endoftext|>\u0338 after",
             "e\u0301t\u00e9 <|im_start|>x", "<|end_of_text|> and <|begin_of_text|>", "  two\n\n\nlines  "]
    for tokenizer, fast in (_fast(built_sample / "tokenizers" / "sample-qwen"), (llama3[1], llama3_fast)):
        wrapping = Wrapping.of(tokenizer)
        together, per_document = fast.encode_batch(texts), fast.encode_each(texts)
        assert np.array_equal(together[0], per_document[0]) and np.array_equal(together[1], per_document[1])
        for text in texts:  # alone, each plain text takes the joined call
            ids, lengths = fast.encode_batch([text])
            assert lengths.tolist() == [len(ids)]
            assert [*wrapping.prefix, *ids.tolist(), *wrapping.suffix] == tokenizer(text)["input_ids"], text


def test_dataset_sample_is_the_start_and_a_seeded_run(tmp_path: Path) -> None:
    path = tmp_path / "clean.jsonl"
    path.write_text("".join(json.dumps({"text": f"document {n}"}) + "\n" for n in range(500)), encoding="utf-8")
    sample = dataset_sample(path, count=10, seed=3)
    assert sample[:10] == [f"document {n}" for n in range(10)]
    numbers = [int(text.split()[1]) for text in sample[10:]]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and numbers[0] > 10
    assert sample == dataset_sample(path, count=10, seed=3) != dataset_sample(path, count=10, seed=4)
