"""Foreign text made safe to show: the one owner of output sanitising, at two places no renderer can skip.

Where foreign records enter the renderers (:func:`sanitised`) and where text leaves the program (:func:`one_line`,
:func:`safe_text`, :func:`safe_markdown`). Controls, separators, bidirectional controls and lone surrogates are shown
as their Python escape (``\x1b``), never dropped; tests/house/test_printers.py walks every printer with one corpus.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # only the bound: a command that never reads a result (history trend) need not load pydantic
    from pydantic import BaseModel

SHOWN_CHARS = 120  # a field quoted in a line
MESSAGE_CHARS = 2_000  # a one-line message (an error naming what it refused)
LINE_CHARS = 10_000  # a line of a rendered document
# C0 and C1 controls, DEL, the line and paragraph separators, bidirectional embeddings, overrides and isolates
# (they reorder what a reader sees), and lone surrogates (they end an encoder with a traceback).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_IN_DOCUMENT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# An HTML tag in Markdown (a viewer renders it) other than the documents' own collapsed sections.
_FOREIGN_TAG = re.compile(r"<(?!/?(?:details|summary)>)")

Model = TypeVar("Model", bound="BaseModel")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def one_line(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as one safe line: every unsafe character escaped, at most ``limit`` characters."""
    return _cut(_UNSAFE.sub(_escaped, str(text)[: limit + 1]), limit)  # an escape is never shorter than its character


def safe_text(text: str, limit: int | None = LINE_CHARS) -> str:
    """A rendered document (console output, a dry run) safe to print or write: line breaks and tabs kept, each line
    at most ``limit`` characters (None: as long as it is, for a document that is not foreign text's, an SVG)."""
    shown = _UNSAFE_IN_DOCUMENT.sub(_escaped, text)
    if limit is None or len(shown) <= limit:
        return shown
    return "\n".join(_cut(line, limit) for line in shown.split("\n"))


def safe_markdown(text: str) -> str:
    """A Markdown document (``compare.md``, ``gpu_check.md``): :func:`safe_text`, and no HTML tag of foreign text
    (``<script>``, ``<img onerror>``) a viewer would render: its ``<`` shown as ``&lt;``."""
    return _FOREIGN_TAG.sub("&lt;", safe_text(text))


def unsafe_character(text: str) -> str | None:
    """The first character :func:`one_line` would escape (a C0 or C1 control, a bidirectional control, a line
    separator, a lone surrogate) as its escape, or None: a rule that refuses such text refuses them all."""
    found = _UNSAFE.search(text)
    return None if found is None else _escaped(found)


def _clean(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        return (_UNSAFE.sub(_escaped, value), True) if _UNSAFE.search(value) else (value, False)
    if isinstance(value, dict):
        pairs = [(_clean(key), _clean(item)) for key, item in value.items()]
        if any(key[1] or item[1] for key, item in pairs):
            return {key[0]: item[0] for key, item in pairs}, True
        return value, False
    if isinstance(value, list | tuple):
        items = [_clean(item) for item in value]
        if any(changed for _, changed in items):
            return type(value)(item for item, _ in items), True
        return value, False
    return value, False


# What an unsafe character looks like in pydantic's JSON: C0 controls escaped (``\\n``, ``\\u001b``), lone
# surrogates escaped, the others (DEL, C1, separators, bidi) raw. A clean record (nearly every one) is told by two
# searches of its JSON, written by pydantic-core: a pure-ASCII text holds none of the raw ones but DEL.
_ESCAPED_IN_JSON = re.compile(r"\\(?:[nrtbf]|u00[01]|u007|ud[89a-fA-F])")
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _may_hold_unsafe(text: str) -> bool:
    raw = "\x7f" in text if text.isascii() else _RAW_IN_JSON.search(text) is not None
    return raw or _ESCAPED_IN_JSON.search(text) is not None


def sanitised(record: Model) -> Model:
    """``record`` with every string (keys too) made one line and inert; the same object when none needed it. Nothing is
    cut: a fingerprint or an environment value is compared, not shown; bounding is the renderer's :func:`one_line`."""
    try:
        text = record.model_dump_json()
    except Exception:  # a lone surrogate cannot be written as JSON: take the slow path
        text = "\\ud800"
    if not _may_hold_unsafe(text):
        return record
    data, changed = _clean(record.model_dump(mode="python"))
    return type(record).model_validate(data) if changed else record
