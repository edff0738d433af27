"""Exactness gate of the fast tokenizer path: the same ids as ``tokenizer(text)``, or the reason why not.

One differing document among the dataset's first, a seeded random run of them and :func:`adversarial_texts`
refuses the fast path.
"""

from __future__ import annotations

import itertools
import json
import random
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tiktoken

from data.common import iter_jsonl_texts
from data.encoding.fast_bpe import DOCUMENT_BREAK, FastBpe, Wrapping, byte_level_alphabet

SAMPLE_DOCUMENTS = 64  # from the start of the dataset, and again from a seeded random place

# Supplementary-plane blocks with letters, digits, symbols or marks that real text uses:
# historic and newer scripts, musical and mathematical letters, emoji, tags and variation
# selectors, the first CJK extension B characters.
_SUPPLEMENTARY = ((0x10000, 0x11FFF), (0x16800, 0x16FFF), (0x1D000, 0x1D7FF), (0x1E800, 0x1EFFF),
                  (0x1F000, 0x1FAFF), (0x20000, 0x20FFF), (0xE0000, 0xE01EF))
_CODE_POINTS_PER_TEXT = 4096


def dataset_sample(path: Path, count: int = SAMPLE_DOCUMENTS, seed: int = 0) -> list[str]:
    """The first ``count`` documents of a JSONL file, then ``count`` in a row from a seeded random byte offset
    (lines that do not parse are skipped: the encode pass reports them)."""
    first = list(itertools.islice(iter_jsonl_texts(path), count))
    size = path.stat().st_size
    picked: list[str] = []
    with path.open("rb") as stream:
        stream.seek(random.Random(seed).randrange(size) if size else 0)
        stream.readline()  # the rest of the line the offset fell in
        for line in stream:
            try:
                text = json.loads(line).get("text")
            except (ValueError, AttributeError):
                continue
            if isinstance(text, str):
                picked.append(text)
            if len(picked) == count:
                break
    return first + picked


def _code_point_texts() -> list[str]:
    """Every code point of the sweep, in runs of 16 neighbours joined by a letter, a digit, a mark or a space.
    Neighbours mostly share a Unicode category, so a code point the two regex engines class differently moves a piece
    boundary, which :func:`split_difference` sees."""
    points = [code for code in range(0x10000) if not 0xD800 <= code < 0xE000]
    points += [code for low, high in _SUPPLEMENTARY for code in range(low, high + 1)]
    runs = ["".join(map(chr, points[start:start + 16])) for start in range(0, len(points), 16)]
    per_text = _CODE_POINTS_PER_TEXT // 16
    return [glue + glue.join(runs[start:start + per_text]) + glue
            for start in range(0, len(runs), per_text) for glue in ("a", "1", "!", " ")]


def adversarial_texts(specials: Sequence[str]) -> list[str]:
    """Texts built to make two BPE implementations disagree, if they can."""
    spaces = [" " * n for n in (1, 2, 3, 15, 16, 17, 64, 1000)]
    spaces += ["\t" * 9, "\n" * 7, " \n \n\t\n  ", "\u3000" * 5, "\u00a0" * 4 + "x", " \r\n\r\n x \r ", "\x0b\x0c\x85"]
    texts = [f"{run}word{run}" for run in spaces] + [f"a{run}" for run in spaces] + [f"{run}1" for run in spaces]
    texts += ["1", "12", "123", "1234", "1234567890" * 13, "3.14159 1,000,000 -42 +7e10", "abc123def 12ab 9x",
              "\u0663\u0664\u0665 \uff11\uff12\uff13 \u00bd\u00b2\u2163 \U0001d7d9\U0001d7da 10\u00b3"]
    texts += ["'s 'S 'ſ 't 'T 're 'RE 'rE 've 'VE 'm 'M 'll 'LL 'd 'D", "don't I'M we'LL you’re ''s ' s 'x",
              "ab" * 3000, "\u6771" * 2000, "e\u0301\u0301 \u1100\u1161\u11a8 A\u030a \ufb01 \u212b \u2126 K",
              "\U0001f469\u200d\U0001f4bb \U0001f1eb\U0001f1f7 \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
              DOCUMENT_BREAK, f"a{DOCUMENT_BREAK}b", DOCUMENT_BREAK[:-1], "<|", "|>", "<||>", "<|endoftext", "", " "]
    for special in list(specials)[:24]:
        texts += [special, f" {special} ", special * 2, f"x{special}y", special[:-1], special[1:], special.upper(),
                  f"{special}\u0338", f"e\u0301{special}", special.replace("|", "| "), f"{special}{special[:-1]}"]
    return texts + _code_point_texts()


def _describe(expected: Sequence[int], actual: Sequence[int]) -> str:
    at = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
              min(len(expected), len(actual)))
    return (f"first difference at token {at}: tokenizer(text) gives {list(expected[at:at + 4])}, "
            f"the fast path {list(actual[at:at + 4])} ({len(expected)} vs {len(actual)} tokens)")


def _split(result: tuple[np.ndarray, np.ndarray] | None, count: int) -> list[list[int]] | None:
    if result is None:
        return None
    ids, lengths = result
    if len(lengths) != count:
        return None
    return [part.tolist() for part in np.split(ids, np.cumsum(lengths)[:-1])] if count else []


def split_difference(tokenizer: Any, fast: FastBpe, texts: Sequence[str]) -> str | None:
    """None when ``tiktoken``'s regex engine cuts every text into the pieces the tokenizer's pre-tokenizer does. A probe
    encoding (the same pattern over the single bytes plus every piece the tokenizer cut) gives one token per piece, so a
    piece boundary in another place gives another sequence."""
    pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer
    texts = [unicodedata.normalize("NFC", text) if fast.nfc else text for text in texts]
    cuts = [[text[start:end] for _, (start, end) in pre_tokenizer.pre_tokenize_str(text)] for text in texts]
    ranks = {bytes([byte]): byte for byte in range(256)}
    for pieces in cuts:
        for piece in pieces:
            ranks.setdefault(piece.encode("utf-8"), len(ranks))
    probe = tiktoken.Encoding("tprimat-split-probe", pat_str=fast.pattern, mergeable_ranks=ranks, special_tokens={})
    for index, (text, pieces) in enumerate(zip(texts, cuts, strict=True)):
        if probe.encode_ordinary(text) != [ranks[piece.encode("utf-8")] for piece in pieces]:
            return f"the split pattern cuts text {index} ({text[:24]!r}) differently in tiktoken's regex engine"
    return None


def whole_token_difference(tokenizer: Any, fast: FastBpe) -> str | None:
    """Without ``ignore_merges``, each token alone must still merge back into itself, as ``tiktoken`` assumes (it
    returns a piece that is a token as that token)."""
    if fast.whole_words:
        return None
    model = tokenizer.backend_tokenizer.model
    table = {ord(char): chr(byte) for byte, char in byte_level_alphabet().items()}
    for token, token_id in fast.vocab.items():
        if len(token) > 1 and [piece.id for piece in model.tokenize(token)] != [token_id]:
            raw = token.translate(table).encode("latin-1")
            return (f"the token {raw!r} alone does not merge back into itself "
                    f"(tiktoken: {fast.encoding._encode_single_piece(raw)})")
    return None


def first_difference(tokenizer: Any, fast: FastBpe, wrapping: Wrapping, sample: Sequence[str],
                     adversarial: Sequence[str]) -> str | None:
    """None when the fast path gives ``tokenizer(text)``'s ids for every text; else one line saying where not. Cheapest
    first: the regex split, every token on its own, then the ids against ``tokenizer(texts)`` (the batched form of
    ``preprocess_data.py``'s per-document call), both ways the fast path encodes a batch."""
    sweep = set(_code_point_texts())
    reason = split_difference(tokenizer, fast, [*sample, *adversarial]) or whole_token_difference(tokenizer, fast)
    if reason:
        return reason
    groups = [(name, list(texts), [list(ids) for ids in tokenizer(list(texts), return_attention_mask=False).input_ids])
              for name, texts in (("dataset", sample), ("adversarial", [t for t in adversarial if t not in sweep]))
              if texts]
    prefix, suffix = list(wrapping.prefix), list(wrapping.suffix)
    for name, texts, expected in groups:
        for way, encode in (("batch", fast.encode_batch), ("per-document", fast.encode_each)):
            # Small batches, so that a text NFC changes sends only its own batch one document at a time.
            parts = [_split(encode(texts[start:start + 16]), len(texts[start:start + 16]))
                     for start in range(0, len(texts), 16)]
            if any(part is None for part in parts):
                return f"the fast path cannot encode the {name} sample ({way}) without the tokenizer's help"
            docs = [doc for part in parts for doc in part or []]
            for index, (want, got) in enumerate(zip(expected, docs, strict=True)):
                got = prefix + got + suffix
                if want != got:
                    return f"{name} text {index} ({texts[index][:40]!r}, {way}): {_describe(want, got)}"
    return None
