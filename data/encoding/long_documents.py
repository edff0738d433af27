"""Long documents in bounded pieces: one 50 MB document must not take gigabytes to encode.

``tokenizers`` keeps a per-token ``Encoding`` for the whole text (about 650-700 bytes per token,
docs/PERFORMANCE.md), so a document longer than :data:`LONG_DOCUMENT_CHARS` is cut at word boundaries, the pieces
encoded without special tokens and the tokenizer's own put around the whole once. Exact or not at all:
:func:`PieceEncoder.check` compares both ways on a stretch of the first long document.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LONG_DOCUMENT_CHARS = 1 << 20  # longer documents are encoded in pieces of at most about this size
CHECK_CHARS = 1 << 18  # the stretch of the first long document both ways are compared on
CHECK_PIECE_CHARS = 1 << 14  # ... cut into pieces this small, so the check crosses many cuts
# A cut goes before a space that follows a non-space and precedes a letter or digit.
_BOUNDARY = re.compile(r"(?<=\S) (?=[^\W_])")


class LongDocumentError(ValueError):
    """A document is too long to encode at once and this tokenizer cannot encode it in pieces exactly."""


def pieces(text: str, limit: int = LONG_DOCUMENT_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most about ``limit`` characters, cut only at word boundaries (one endless word stays
    in one piece)."""
    start = 0
    while len(text) - start > limit:
        window_end = start + limit
        cut = None
        for match in _BOUNDARY.finditer(text, start + 1, window_end):
            cut = match.start()
        if cut is None:
            match = _BOUNDARY.search(text, window_end)
            if match is None:
                break
            cut = match.start()
        yield text[start:cut]
        start = cut
    yield text[start:]


def special_wrapping(backend: Any, specials: bool = True) -> tuple[list[int], list[int]]:
    """(prefix, suffix): the special ids the tokenizer adds around a text; None when ``specials`` is off."""
    if not specials:
        return [], []
    probe = "piece"
    plain = backend.encode(probe, add_special_tokens=False).ids
    full = backend.encode(probe, add_special_tokens=True).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    raise LongDocumentError("the tokenizer's special tokens are not a prefix and suffix around the text")


@dataclass
class PieceEncoder:
    """``tokenizer(text)["input_ids"]`` of a long text, encoded piece by piece with bounded memory."""

    tokenizer: Any
    backend: Any
    limit: int = LONG_DOCUMENT_CHARS
    checked: bool | None = None  # None until the first long document was checked
    reason: str = ""
    wrapping: tuple[list[int], list[int]] = field(default_factory=lambda: ([], []))

    def _pieces_ids(self, text: str, limit: int) -> np.ndarray:
        parts = [np.asarray(self.backend.encode(piece, add_special_tokens=False).ids, dtype=np.int64)
                 for piece in pieces(text, limit)]
        prefix, suffix = self.wrapping
        return np.concatenate([np.asarray(prefix, dtype=np.int64), *parts, np.asarray(suffix, dtype=np.int64)])

    def check(self, text: str) -> None:
        """Compare pieces with ``tokenizer(text)`` on a bounded stretch of ``text`` (once per dataset)."""
        if self.checked is None:
            try:
                self.wrapping = special_wrapping(self.backend, bool(getattr(self.tokenizer, "policy_specials", True)))
                stretch = text[:CHECK_CHARS]
                expected = self.tokenizer(stretch)["input_ids"]
                self.checked = self._pieces_ids(stretch, CHECK_PIECE_CHARS).tolist() == list(expected)
                self.reason = "" if self.checked else "its ids differ when the text is cut at word boundaries"
            except LongDocumentError as exc:
                self.checked, self.reason = False, str(exc)
            if self.checked:
                print(f"encode: note: documents over {self.limit:,} characters are encoded in pieces at word "
                      "boundaries (checked identical to tokenizer(text) on the first one)")
        if not self.checked:
            raise LongDocumentError(
                f"a document of {len(text):,} characters is longer than {self.limit:,}, and this tokenizer cannot "
                f"encode it in pieces exactly ({self.reason}); encoding it at once needs about 700 bytes per "
                "token: split such documents before encoding")

    def __call__(self, text: str) -> np.ndarray:
        self.check(text)
        return self._pieces_ids(text, self.limit)
