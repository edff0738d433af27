"""Foreign text made safe to show: the one owner of output sanitising.

Why (issue 33): escape sequences (clear screen, set a window title) and line breaks from a result's
``display_name``, ``device_name`` or ``error``, a prescreen's ``warnings``, a log line quoted in a reason or a log
file's name reached the console, ``compare.md`` and ``gpu_check.md`` unchanged; ``# FORGED VERDICT: ready``
appeared as a heading under gpu_check's verdict. ``one_line`` was applied at some outputs, not all. So the step
is structural, at two places no renderer can skip:

* where foreign records enter the renderers: :func:`sanitised` returns a typed record (a result, a prescreen)
  whose every string is one line with nothing a terminal or Markdown acts on (``evaluate/analysis/results.py``'s loader
  and ``evaluate/gpu_check/check.py``'s prescreen reader use it, so every table, report and plot draws from clean text);
* where text leaves the program: :func:`one_line` for a field or a message that quotes input (every table cell
  of ``evaluate/render/tables.py``, console and Markdown), :func:`safe_text` for a whole rendered document
  (``compare.md``, ``gpu_check.md``, the console reports): line breaks kept, every other control character,
  C1 control, line or paragraph separator, bidirectional override and lone surrogate escaped.

What is escaped is shown as its Python escape (``\\x1b``, ``\\n``, ``\\u202e``), never dropped: what a file
holds stays visible.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # only the bound: a command that never reads a result (history trend) need not load pydantic
    from pydantic import BaseModel

SHOWN_CHARS = 120
# C0 and C1 controls, DEL, the line and paragraph separators, bidirectional embeddings, overrides and isolates
# (they reorder what a reader sees), and lone surrogates (they end an encoder with a traceback).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_IN_DOCUMENT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

Model = TypeVar("Model", bound="BaseModel")


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape", "backslashreplace").decode("ascii")


def one_line(text: object, limit: int = SHOWN_CHARS) -> str:
    """``text`` as one safe line: every unsafe character escaped, at most ``limit`` characters."""
    shown = _UNSAFE.sub(_escaped, str(text))
    return shown if len(shown) <= limit else shown[: max(limit - 3, 0)] + "..."


def safe_text(text: str) -> str:
    """A rendered document (console output, Markdown) safe to print or write: line breaks and tabs kept."""
    return _UNSAFE_IN_DOCUMENT.sub(_escaped, text)


def needs_escaping(text: str) -> bool:
    return _UNSAFE.search(text) is not None


def _clean(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        return (_UNSAFE.sub(_escaped, value), True) if needs_escaping(value) else (value, False)
    if isinstance(value, dict):
        changed = False
        out = {}
        for key, item in value.items():
            new_key, key_changed = _clean(key)
            new_item, item_changed = _clean(item)
            out[new_key] = new_item
            changed = changed or key_changed or item_changed
        return (out, True) if changed else (value, False)
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
    """``record`` with every string (keys too) made one line and inert; the same object when none needed it.

    Nothing is cut: the record stays whole (a fingerprint or an environment value is compared, not shown);
    bounding the length is the renderer's :func:`one_line`.
    """
    try:
        text = record.model_dump_json()
    except Exception:  # a lone surrogate cannot be written as JSON: take the slow path
        text = "\\ud800"
    if not _may_hold_unsafe(text):
        return record
    data, changed = _clean(record.model_dump(mode="python"))
    return type(record).model_validate(data) if changed else record
