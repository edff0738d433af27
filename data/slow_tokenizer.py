"""The slow-tokenizer files a release carries, written from the fast ``tokenizer.json`` of a sample tokenizer.

Why: Megatron-LM at ``MEGATRON_REF`` asks ``AutoTokenizer`` for the *slow* class (``use_fast`` False:
``megatron/core/tokenizers/text/libraries/huggingface_tokenizer.py:37,67-73``), which reads its own files:
``Qwen2Tokenizer`` ``vocab.json`` + ``merges.txt``, ``LlamaTokenizer`` (Mistral v0.3) a SentencePiece
``tokenizer.model``. Llama 3.1's ``PreTrainedTokenizerFast`` needs nothing more.

``tokenizer.model`` is encoded in protocol-buffer wire format by hand so the data tools need neither sentencepiece
nor protobuf (field numbers from sentencepiece's ``sentencepiece_model.proto``). The slow ``LlamaTokenizer`` always
puts "▁" before a text, so ``data/clean.py`` strips every document (docs/SAMPLE_ORDER.md).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

# sentencepiece_model.proto: SentencePiece.Type and TrainerSpec.ModelType values
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
BPE = 2
SLOW_FILES = {"Qwen2Tokenizer": ("vocab.json", "merges.txt"), "LlamaTokenizer": ("tokenizer.model",)}


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int32/int64 fields: two's complement over ten bytes
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(int(value))


def _bytes_field(number: int, data: bytes | str) -> bytes:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _float_field(number: int, value: float) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def merges_of(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """The BPE merges of a ``tokenizer.json``, in rank order ("a b" strings or [a, b] pairs, by version)."""
    pairs = []
    for merge in spec["model"]["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        pairs.append((left, right))
    return pairs


def _vocabulary(spec: dict[str, Any]) -> list[str]:
    by_id = sorted(spec["model"]["vocab"].items(), key=lambda item: item[1])
    if [index for _, index in by_id] != list(range(len(by_id))):
        raise ValueError("tokenizer.json: the BPE vocabulary's ids are not 0..n-1")
    return [piece for piece, _ in by_id]


def sentencepiece_model(spec: dict[str, Any], unk: str, bos: str, eos: str) -> bytes:
    """A SentencePiece BPE ``ModelProto`` over ``spec``'s vocabulary, ids and merges (see the module text)."""
    pieces = _vocabulary(spec)
    ids = {piece: index for index, piece in enumerate(pieces)}
    specials = {token["content"] for token in spec.get("added_tokens", []) if token.get("special")}
    rank: dict[str, int] = {}
    for index, (left, right) in enumerate(merges_of(spec)):
        rank.setdefault(left + right, index)
    body = bytearray()
    for index, piece in enumerate(pieces):
        if piece == unk:
            kind, score = UNKNOWN, 0.0
        elif piece in specials:
            kind, score = CONTROL, 0.0
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            kind, score = BYTE, 0.0
        else:  # learnt pieces by merge rank; the single characters (no merge made them) after every merge
            kind, score = NORMAL, -float(rank.get(piece, len(rank) + index))
        body += _bytes_field(1, _bytes_field(1, piece) + _float_field(2, score) + _int_field(3, kind))
    trainer = (_int_field(3, BPE) + _int_field(4, len(pieces)) + _int_field(35, 1) + _int_field(40, ids[unk])
               + _int_field(41, ids[bos]) + _int_field(42, ids[eos]) + _int_field(43, -1)
               + _bytes_field(45, unk) + _bytes_field(46, bos) + _bytes_field(47, eos))
    normalizer = _bytes_field(1, "identity") + _int_field(3, 1) + _int_field(4, 0) + _int_field(5, 1)
    return bytes(body + _bytes_field(2, trainer) + _bytes_field(3, normalizer))


def write_slow_files(directory: Path, tokenizer_class: str, unk: str | None = None, bos: str | None = None,
                     eos: str | None = None) -> list[str]:
    """Write the slow files ``tokenizer_class`` loads from, beside ``directory/tokenizer.json``; their names."""
    names = SLOW_FILES.get(tokenizer_class, ())
    if not names:
        return []
    spec = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    if tokenizer_class == "Qwen2Tokenizer":
        vocab = {piece: index for index, piece in enumerate(_vocabulary(spec))}
        (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        merges = "".join(f"{left} {right}\n" for left, right in merges_of(spec))
        (directory / "merges.txt").write_text("#version: 0.2\n" + merges, encoding="utf-8")
    else:
        if not (unk and bos and eos):
            raise ValueError(f"{tokenizer_class}: a SentencePiece model needs its unk, bos and eos pieces")
        (directory / "tokenizer.model").write_bytes(sentencepiece_model(spec, unk, bos, eos))
    return list(names)
