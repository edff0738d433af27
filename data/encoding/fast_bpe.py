"""The fast tokenizer path of ``data/encode.py``: a ``tiktoken`` encoding built from a tokenizer's own files.

A byte-level BPE whose pre-tokenizer is one regex split (Llama 3, Qwen 2.5, the sample tokenizers) is what
``tiktoken`` implements, several times faster (docs/PERFORMANCE.md); ``data/encoding/check.py`` decides whether its
ids equal the tokenizer's. A batch is one ``tiktoken`` call (GIL released), the documents joined by a separator
registered as a special token, so each is encoded exactly as on its own.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import tiktoken

# Registered as one more special token to cut a joined batch back into documents. Its
# private-use characters make it unlikely in text; a document that does contain it is
# detected (one separator too many) and its batch encoded one document at a time.
DOCUMENT_BREAK = "\ue000tprimat-document-break\ue001"


class NotExpressible(ValueError):
    """The tokenizer cannot be reproduced by ``tiktoken``; the message says why, in one line."""


def byte_level_alphabet() -> dict[int, str]:
    """The byte -> character map of byte-level BPE vocabularies (GPT-2's ``bytes_to_unicode``)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    alphabet = {byte: chr(byte) for byte in printable}
    shifted = (byte for byte in range(256) if byte not in alphabet)
    alphabet.update((byte, chr(0x100 + n)) for n, byte in enumerate(shifted))
    return alphabet


def _to_bytes_table() -> dict[int, str]:
    """A ``str.translate`` table taking a vocabulary string to Latin-1 characters, one per byte; U+FFFF outside
    the alphabet, so the Latin-1 encoding that follows fails instead of passing a stray character through."""
    table = {ord(char): chr(byte) for byte, char in byte_level_alphabet().items()}
    for code in range(0x100):
        table.setdefault(code, "\uffff")
    return table


def vocabulary_bytes(vocab: dict[str, int]) -> dict[bytes, int]:
    """``tokenizer.json``'s vocabulary as ``tiktoken`` ranks: the bytes of each token -> its id."""
    table = _to_bytes_table()
    ranks: dict[bytes, int] = {}
    for token, token_id in vocab.items():
        try:
            ranks[token.translate(table).encode("latin-1")] = token_id
        except UnicodeEncodeError:
            raise NotExpressible(f"vocabulary token {token!r} is not in the byte-level alphabet") from None
    if len(set(ranks.values())) != len(ranks):
        raise NotExpressible("the vocabulary gives one id to several tokens")
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise NotExpressible(f"the vocabulary lacks {len(missing)} of the 256 single bytes (first: {missing[0]:#04x})")
    return ranks


def check_merges(vocab: dict[str, int], merges: Sequence[Any]) -> None:
    """Every merge makes a known token, and merges come in the order of the ids they make. ``tiktoken`` merges by the
    result's rank (id), ``tokenizers`` by list position. Vectorised: Llama 3 lists 280,147 merges and this runs before
    every encode."""
    if all(isinstance(merge, str) for merge in merges):
        # Byte-level tokens never contain U+0020 (the alphabet maps the space byte to "Ġ"),
        # so a well-formed merge string is exactly two tokens around one space.
        if sum(merge.count(" ") for merge in merges) != len(merges):
            position = next(i for i, merge in enumerate(merges) if merge.count(" ") != 1)
            raise NotExpressible(f"merge {position} ({merges[position]!r}) is not two tokens")
        made = np.array([vocab.get(merge.replace(" ", ""), -1) for merge in merges], dtype=np.int64)
    else:  # ["left", "right"] pairs, the newer tokenizer.json format
        if any(len(_pair(merge)) != 2 for merge in merges):
            position = next(i for i, merge in enumerate(merges) if len(_pair(merge)) != 2)
            raise NotExpressible(f"merge {position} ({merges[position]!r}) is not two tokens")
        made = np.array([vocab.get("".join(_pair(merge)), -1) for merge in merges], dtype=np.int64)
    unknown = np.flatnonzero(made < 0)
    if len(unknown):
        left, right = _pair(merges[unknown[0]])
        raise NotExpressible(f"merge {unknown[0]} ({left!r} {right!r}) references the unknown token "
                             f"{left + right!r}")
    backwards = np.flatnonzero(np.diff(made) < 0)
    if len(backwards):
        position = int(backwards[0]) + 1
        left, right = _pair(merges[position])
        raise NotExpressible(f"merge {position} ({left!r} {right!r}) makes id {made[position]} after a merge "
                             f"that made id {made[position - 1]}: merge order and token ids disagree")


def _pair(merge: Any) -> list[str]:
    return merge.split(" ") if isinstance(merge, str) else [str(token) for token in merge]


def _component(obj: Any) -> dict[str, Any] | None:
    """A ``tokenizers`` normaliser/pre-tokenizer as its JSON (what it serialises to), or None."""
    return None if obj is None else json.loads(obj.__getstate__())


def split_pattern(pre_tokenizer: dict[str, Any] | None) -> str:
    """The regex of a ``Split(Regex, isolated) + ByteLevel(no prefix space, no regex)`` pre-tokenizer."""
    steps = (pre_tokenizer or {}).get("pretokenizers") if (pre_tokenizer or {}).get("type") == "Sequence" else None
    kinds = [step.get("type") for step in steps or []]
    if kinds != ["Split", "ByteLevel"]:
        raise NotExpressible(f"pre-tokenizer is {kinds or (pre_tokenizer or {}).get('type')}, not a regex Split "
                             "followed by ByteLevel")
    split, byte_level = steps
    pattern = split.get("pattern", {}).get("Regex")
    if pattern is None or split.get("behavior") != "Isolated" or split.get("invert"):
        raise NotExpressible("the Split pre-tokenizer is not an isolated, non-inverted regex split")
    if byte_level.get("add_prefix_space") or byte_level.get("use_regex"):
        raise NotExpressible("the ByteLevel pre-tokenizer adds a prefix space or runs its own regex")
    return pattern


def uses_nfc(normalizer: dict[str, Any] | None) -> bool:
    """No normaliser, or NFC (applied here with ``unicodedata``); anything else is not expressible."""
    if normalizer is None:
        return False
    kind = normalizer.get("type")
    if kind == "Sequence" and [step.get("type") for step in normalizer.get("normalizers", [])] == ["NFC"]:
        return True
    if kind != "NFC":
        raise NotExpressible(f"normalizer {kind} is not supported (only none or NFC)")
    return True


# What tokenizer.json leaves out of an added token, as the tokenizers library reads it.
_ADDED_DEFAULTS = {"content": "", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                   "special": False}


def special_tokens(added: dict[int, Any], nfc: bool, ranks: dict[bytes, int]) -> dict[str, int]:
    """The added tokens as ``tiktoken`` special tokens, if they are matched the way ``tiktoken`` matches them."""
    specials: dict[str, int] = {}
    for token_id, token in sorted(added.items()):
        content = token.content
        if not content or token.lstrip or token.rstrip or token.single_word:
            raise NotExpressible(f"added token {content!r} is empty or strips/needs word boundaries")
        if nfc and token.normalized:
            raise NotExpressible(f"added token {content!r} is matched on normalised text")
        if DOCUMENT_BREAK[0] in content or DOCUMENT_BREAK[-1] in content:
            raise NotExpressible(f"added token {content!r} contains a character of the document separator")
        if specials.setdefault(content, token_id) != token_id:
            raise NotExpressible(f"added token {content!r} has two ids")
    values = set(ranks.values())
    for content, token_id in specials.items():
        if token_id in values and ranks.get(content.encode("utf-8")) != token_id:
            raise NotExpressible(f"added token {content!r} reuses the id {token_id} of another vocabulary token")
    # The tokenizers library matches the longest added token, tiktoken the first listed: same
    # result unless one token is a prefix of another.
    ordered = sorted(specials)
    for shorter, longer in itertools.pairwise(ordered):
        if longer.startswith(shorter):
            raise NotExpressible(f"added token {shorter!r} is a prefix of {longer!r}")
    return specials


@dataclass
class FastBpe:
    """A ``tiktoken`` encoding equal (by construction; checked by ``data/encoding/check.py``) to a tokenizer's BPE."""

    encoding: Any
    specials: dict[str, int]
    nfc: bool
    break_id: int
    pattern: str  # the split regex
    whole_words: bool  # the BPE returns a piece that is itself a token as is (``ignore_merges``), as tiktoken does
    vocab: dict[str, int]  # tokenizer.json's BPE vocabulary (byte-level strings)

    @classmethod
    def from_file(cls, tokenizer_json: Path) -> FastBpe:
        """Build from ``tokenizer.json`` alone, before the tokenizer is loaded: only a candidate until
        :meth:`check_loaded` has passed."""
        try:
            spec = json.loads(tokenizer_json.read_bytes())
        except FileNotFoundError:
            raise NotExpressible(f"no {tokenizer_json.name} in {tokenizer_json.parent}") from None
        except (OSError, ValueError) as exc:
            raise NotExpressible(f"cannot read {tokenizer_json}: {exc}") from None
        model = spec.get("model") if isinstance(spec, dict) else None
        if not isinstance(model, dict) or model.get("type") != "BPE":
            raise NotExpressible(f"model is {(model or {}).get('type')}, not BPE")
        if model.get("dropout") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
            raise NotExpressible("BPE with dropout or subword prefix/suffix")
        vocab, merges = model.get("vocab"), model.get("merges")
        if not isinstance(vocab, dict) or not isinstance(merges, list):
            raise NotExpressible(f"{tokenizer_json.name} has no BPE vocabulary and merges")
        pattern = split_pattern(spec.get("pre_tokenizer"))
        nfc = uses_nfc(spec.get("normalizer"))
        ranks = vocabulary_bytes(vocab)
        check_merges(vocab, merges)
        added = {entry.get("id"): SimpleNamespace(**{**_ADDED_DEFAULTS, **entry})
                 for entry in spec.get("added_tokens") or []}
        specials = special_tokens(added, nfc, ranks)
        break_id = max(max(ranks.values()), max(specials.values(), default=0)) + 1
        try:
            encoding = tiktoken.Encoding(f"tprimat:{tokenizer_json.parent.name}", pat_str=pattern,
                                         mergeable_ranks=ranks, special_tokens={**specials, DOCUMENT_BREAK: break_id})
        except ValueError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise NotExpressible(f"tiktoken rejects the split pattern or vocabulary: {reason}") from None
        return cls(encoding=encoding, specials=specials, nfc=nfc, break_id=break_id, pattern=pattern,
                   whole_words=bool(model.get("ignore_merges")), vocab=vocab)

    def check_loaded(self, tokenizer: Any) -> None:
        """The loaded tokenizer must be the one the file describes (``transformers`` may change it at load)."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise NotExpressible("the tokenizer has no tokenizers backend")
        if backend.get_vocab_size(with_added_tokens=False) != len(self.vocab):
            raise NotExpressible(f"tokenizer.json has {len(self.vocab)} tokens, the loaded tokenizer "
                                 f"{backend.get_vocab_size(with_added_tokens=False)}")
        if split_pattern(_component(backend.pre_tokenizer)) != self.pattern:
            raise NotExpressible("the loaded tokenizer splits with another pattern than its tokenizer.json")
        if uses_nfc(_component(backend.normalizer)) != self.nfc:
            raise NotExpressible("the loaded tokenizer normalises otherwise than its tokenizer.json")
        if special_tokens(backend.get_added_tokens_decoder(), self.nfc, {}) != self.specials:
            raise NotExpressible("the loaded tokenizer has other added tokens than its tokenizer.json")

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, tokenizer_json: Path) -> FastBpe:
        """:meth:`from_file`, then :meth:`check_loaded` against the loaded tokenizer."""
        if getattr(tokenizer, "backend_tokenizer", None) is None:
            raise NotExpressible("the tokenizer has no tokenizers backend")
        fast = cls.from_file(tokenizer_json)
        fast.check_loaded(tokenizer)
        return fast

    # ------------------------------------------------------------------
    # encoding

    def _normal(self, text: str) -> str:
        return unicodedata.normalize("NFC", text) if self.nfc else text

    @cached_property
    def _special_pattern(self) -> re.Pattern[str]:
        longest_first = sorted(self.specials, key=len, reverse=True)
        return re.compile("|".join(map(re.escape, longest_first))) if longest_first else re.compile(r"(?!)")

    def encode(self, text: str) -> list[int]:
        """One document's ids without any BOS/EOS (``tokenizer(text, add_special_tokens=False)``). With NFC only the
        text between added tokens is normalised, as the ``tokenizers`` library does. Raises ``UnicodeEncodeError`` for a
        lone surrogate (``tiktoken`` would replace it)."""
        text.encode("utf-8")
        if not self.nfc:
            return self.encoding.encode(text, allowed_special=set(self.specials), disallowed_special=())
        ids: list[int] = []
        start = 0
        for match in self._special_pattern.finditer(text):
            ids += self.encoding.encode_ordinary(self._normal(text[start:match.start()]))
            ids.append(self.specials[match.group()])
            start = match.end()
        return ids + self.encoding.encode_ordinary(self._normal(text[start:]))

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """The ids of many documents, concatenated (uint32), and each document's count; no BOS/EOS. None when the batch
        holds a lone surrogate: the caller encodes that batch with the tokenizer itself."""
        if self.nfc:
            normal = [self._normal(text) for text in texts]
            # A document that NFC changes may have an added token next to the change: encode
            # such batches one document at a time, so added tokens are found in the raw text.
            if any(new is not old and new != old for new, old in zip(normal, texts, strict=True)):
                return self.encode_each(texts)
            texts = normal
        try:
            ids = self._encode_joined(DOCUMENT_BREAK.join(texts) + DOCUMENT_BREAK)
        except UnicodeEncodeError:
            return None
        breaks = np.flatnonzero(ids == self.break_id)
        if len(breaks) != len(texts):  # a document contains the separator itself
            return self.encode_each(texts)
        return ids[ids != self.break_id], np.diff(breaks, prepend=-1) - 1

    def _encode_joined(self, text: str) -> np.ndarray:
        to_numpy = getattr(self.encoding, "encode_to_numpy", None)
        if to_numpy is not None:
            return to_numpy(text, allowed_special="all", disallowed_special=())
        # tiktoken < 0.8 (the NeMo 25.04 image has 0.7): no numpy output, and surrogates are
        # replaced instead of refused, so refuse them here as the newer call does.
        text.encode("utf-8")
        return np.array(self.encoding.encode(text, allowed_special="all", disallowed_special=()), dtype=np.uint32)

    def encode_each(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """What :meth:`encode_batch` gives, one ``tiktoken`` call per document (its exact fallback)."""
        try:
            docs = [self.encode(text) for text in texts]
        except UnicodeEncodeError:
            return None
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        flat = np.fromiter((token for doc in docs for token in doc), dtype=np.uint32, count=int(lengths.sum()))
        return flat, lengths


@dataclass(frozen=True)
class Wrapping:
    """The ids ``tokenizer(text)`` puts around a document's own ids (Llama: BOS before; Qwen: none)."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer: Any) -> Wrapping:
        """Measured on probe texts: ``tokenizer(text)`` must be one fixed prefix + the plain ids + one fixed suffix."""
        found: set[Wrapping] = set()
        for probe in ("a", "Hello, world.", " two  words\n", "1234"):
            full = list(tokenizer(probe)["input_ids"])
            plain = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
            start = next((i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain), None)
            if not plain or start is None:
                raise NotExpressible(f"tokenizer({probe!r}) does not contain its ids without special tokens")
            found.add(cls(tuple(full[:start]), tuple(full[start + len(plain):])))
        if len(found) != 1:
            raise NotExpressible("tokenizer(text) adds different special tokens to different texts")
        return found.pop()

    def documents(self, ids: np.ndarray, lengths: np.ndarray, eod: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
        """Each document as ``tokenizer(text)`` gives it plus ``eod``, as Megatron's ``--append-eod`` writes it. An
        empty document stays empty, as in Megatron-LM's ``tools/preprocess_data.py``. Returns the tokens in ``dtype``
        and each document's length."""
        body = lengths + (len(self.prefix) + len(self.suffix))
        sizes = body + (body > 0)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=dtype)
        if len(ids):
            first = np.cumsum(lengths) - lengths  # where each document starts in ``ids``
            shift = np.repeat(starts + len(self.prefix) - first, lengths)
            out[np.arange(len(ids)) + shift] = ids
        for offset, token in enumerate(self.prefix):
            out[starts + offset] = token
        for offset, token in enumerate(self.suffix):
            out[starts + len(self.prefix) + lengths + offset] = token
        out[ends[body > 0] - 1] = eod
        return out, sizes
