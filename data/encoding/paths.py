"""The tokenizer paths of ``data/encode.py``: which implementation encodes a dataset, and how.

``choose_encoder`` returns the fast path (``data/encoding/fast_bpe.py``, exact by ``data/encoding/check.py``) or
the tokenizer itself, with one line saying why.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.encoding.check import adversarial_texts, first_difference
from data.encoding.fast_bpe import FastBpe, NotExpressible, Wrapping
from data.encoding.long_documents import PieceEncoder

BATCH_CHARACTERS = 1 << 20  # a batch also ends at this much text, so book-length documents stay bounded
# Encoded by the fast path on the idle core while the tokenizer loads and the check run (~1.5-2 s holding the GIL,
# Llama 3 on a 2-core VM): about what one tiktoken thread encodes meanwhile (~13 MB/s of prose).
HEAD_CHARACTERS = 24 << 20
_SELF_CHECK_DOCUMENTS = 8
CHECK_TEXT_CHARS = 1 << 16  # the first this many characters of each dataset text take part in the check

# Which implementation produced the ids (recorded in the manifest and printed).
PATH_TIKTOKEN = "tiktoken"
PATH_TOKENIZERS = "tokenizers"
PATH_TRANSFORMERS = "transformers"


def batched(texts: Iterable[str], size: int, characters: int = BATCH_CHARACTERS) -> Iterator[list[str]]:
    batch: list[str] = []
    held = 0
    for text in texts:
        batch.append(text)
        held += len(text)
        if len(batch) >= size or held >= characters:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


Documents = tuple[np.ndarray, np.ndarray]  # the tokens of a batch (eod included) and each document's length


def _documents_from_lists(lists: list[list[int]], eod: int, dtype: type) -> Documents:
    """Per-document id lists -> one array, ``eod`` after every non-empty document (Megatron's ``--append-eod``)."""
    for ids in lists:
        if ids:
            ids.append(eod)
    sizes = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    tokens = np.fromiter(itertools.chain.from_iterable(lists), dtype=dtype, count=int(sizes.sum()))
    return tokens, sizes


class TokenizerEncoder:
    """Batches through the tokenizer itself: ``tokenizers``' ``encode_batch_fast`` (checked against
    ``tokenizer(texts)`` on the first documents and dropped if they differ), or ``tokenizer(texts)``."""

    def __init__(self, tokenizer: Any, eod: int, dtype: type) -> None:
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.eod, self.dtype = eod, dtype
        # The token policy's choice (data/token_policy.py, data/file_tokenizer.py); a transformers tokenizer's own.
        self.specials = bool(getattr(tokenizer, "policy_specials", True))
        self.checked = False
        self.long = PieceEncoder(tokenizer, self.backend) if self.backend is not None else None

    @property
    def path(self) -> str:
        return PATH_TOKENIZERS if self.backend is not None else PATH_TRANSFORMERS

    def ids(self, texts: list[str]) -> list[list[int]]:
        if self.backend is None:
            return list(self.tokenizer(texts, return_attention_mask=False)["input_ids"])
        ids = [encoding.ids for encoding in self.backend.encode_batch_fast(texts, add_special_tokens=self.specials)]
        if not self.checked:
            # The Rust fast path must agree with the transformers call Megatron's tool makes;
            # if a tokenizer adds Python-side behaviour, fall back to that call instead.
            self.checked = True
            sample = texts[:_SELF_CHECK_DOCUMENTS]
            if [self.tokenizer(text)["input_ids"] for text in sample] != ids[: len(sample)]:
                print("encode: note: encode_batch_fast disagrees with tokenizer(text); using tokenizer(texts)")
                self.backend = None
                return self.ids(texts)
        return ids

    def __call__(self, texts: list[str]) -> Documents:
        if self.long is None or all(len(text) <= self.long.limit for text in texts):
            return _documents_from_lists(self.ids(texts), self.eod, self.dtype)
        # Long documents in bounded pieces (data/encoding/long_documents.py), the others as one batch.
        short = [index for index, text in enumerate(texts) if len(text) <= self.long.limit]
        short_ids = dict(zip(short, self.ids([texts[index] for index in short]), strict=True))
        documents = []
        for index, text in enumerate(texts):
            ids = np.asarray(short_ids[index], dtype=np.int64) if index in short_ids else self.long(text)
            documents.append(np.append(ids, self.eod) if len(ids) else ids)
        sizes = np.fromiter((len(ids) for ids in documents), dtype=np.int64, count=len(documents))
        return np.concatenate(documents).astype(self.dtype, copy=False), sizes


class FastEncoder:
    """Batches through ``data/encoding/fast_bpe.py``; a batch it cannot take exactly goes to the tokenizer."""

    path = PATH_TIKTOKEN

    def __init__(self, fast: FastBpe, wrapping: Wrapping, fallback: TokenizerEncoder) -> None:
        self.fast, self.wrapping, self.fallback = fast, wrapping, fallback

    def __call__(self, texts: list[str]) -> Documents:
        return self.finish(self.fast.encode_batch(texts), texts)

    def finish(self, result: tuple[np.ndarray, np.ndarray] | None, texts: list[str]) -> Documents:
        """A batch's ``encode_batch`` result as documents to write (the tokenizer's, if there is none)."""
        if result is None:
            return self.fallback(texts)
        return self.wrapping.documents(*result, eod=self.fallback.eod, dtype=self.fallback.dtype)


@dataclass
class HeadStart:
    """The fast path begun from ``tokenizer.json`` alone, on the first documents, while the tokenizer loads. Loading a
    tokenizer holds the GIL for about a second (Llama 3), ``tiktoken`` does not. Nothing it produces is written before
    the exactness check has passed."""

    candidate: FastBpe | None
    reason: str  # why there is no candidate
    texts: list[str]
    result: Future | None
    pool: ThreadPoolExecutor | None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def start_head(tokenizer_json: Path, texts: Iterator[str], characters: int | None = None) -> HeadStart:
    """Build the fast path from the file and start encoding ``characters`` (default ``HEAD_CHARACTERS``) of texts."""
    try:
        candidate = FastBpe.from_file(tokenizer_json)
    except NotExpressible as exc:
        return HeadStart(None, str(exc), [], None, None)
    head = next(batched(texts, size=1 << 62, characters=characters or HEAD_CHARACTERS), [])
    pool = ThreadPoolExecutor(max_workers=1)
    return HeadStart(candidate, "", head, pool.submit(candidate.encode_batch, head), pool)


def choose_encoder(tokenizer: Any, tokenizer_json: Path | None, check_texts: Sequence[str], eod: int,
                   dtype: type, fast_path: bool = True,
                   head: HeadStart | None = None) -> tuple[FastEncoder | TokenizerEncoder, str]:
    """The fast path when it can be built and gives ``tokenizer(text)``'s ids on every check text. Returns the encoder
    and one line on the choice (the reason, when the fast path is not taken)."""
    fallback = TokenizerEncoder(tokenizer, eod, dtype)
    if fallback.backend is None:
        return fallback, "the tokenizer has no tokenizers backend; fast path not tried"
    if not fast_path:
        return fallback, "fast path turned off (--tokenizer-path tokenizers)"
    if tokenizer_json is None:
        tokenizer_json = Path(getattr(tokenizer, "name_or_path", "") or ".") / "tokenizer.json"
    started = time.perf_counter()
    if head is not None and head.candidate is None:
        return fallback, f"fast path not used: {head.reason}"
    try:
        if head is not None and head.candidate is not None:
            fast = head.candidate
            fast.check_loaded(tokenizer)
        else:
            fast = FastBpe.from_tokenizer(tokenizer, tokenizer_json)
        wrapping = Wrapping.of(tokenizer)
    except NotExpressible as exc:
        return fallback, f"fast path not used: {exc}"
    adversarial = adversarial_texts(list(fast.specials))
    # A bounded stretch of each dataset text: the reference tokenizer(text) of a whole book-length
    # document would take gigabytes (data/encoding/long_documents.py), and a stretch checks the same rules.
    sample = [text[:CHECK_TEXT_CHARS] for text in check_texts]
    difference = first_difference(tokenizer, fast, wrapping, sample, adversarial)
    if difference is not None:
        return fallback, f"fast path not used: it differs from tokenizer(text) on {difference}"
    return FastEncoder(fast, wrapping, fallback), (
        f"fast path: {len(check_texts)} dataset and {len(adversarial)} adversarial texts identical to the "
        f"tokenizer's ids, checked in {time.perf_counter() - started:.1f}s")
