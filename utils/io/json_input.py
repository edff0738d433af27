"""Reading a JSON file tprimat did not necessarily write: bounded in size and depth, one line on any problem.

Why one helper: results are compared across machines, so a result, a step record or a cache is foreign input, and
one hostile file (nested 100,000 deep, a 9,000-digit number, 510 MB of short numbers) must not end a comparison of
the good files beside it. Every failure is a one-line :class:`JsonInputError` naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from utils.io.sanitise import one_line

# A result of a 1,000,000-step run is about 256 MB (tests/e2e/test_output_guard.py); a larger file is not a result.
DEFAULT_MAX_BYTES = 512 * 2**20
# The result model nests at most about ten containers deep; 64 leaves room for free-form blocks.
DEFAULT_MAX_DEPTH = 64

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class JsonInputError(ValueError):
    """A JSON file cannot be used; the message is one line naming the file and the first problem."""


def nesting_depth(text: str) -> int:
    """How many containers deep ``text`` nests (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (a figure that could not be measured is null)")


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JsonInputError(f"{one_line(path, 400)}: not a regular file")
        if info.st_size > max_bytes:
            raise JsonInputError(f"{one_line(path, 400)}: {info.st_size:,} bytes, over the {max_bytes:,}-byte limit")
        chunks, size = [], 0
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
            size += len(block)
            if size > max_bytes:  # grew while being read
                raise JsonInputError(f"{one_line(path, 400)}: over the {max_bytes:,}-byte limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _count_problem(raw: bytes, where: str, max_values: int | None, max_containers: int | None) -> str | None:
    """Why ``raw`` holds more values or containers than allowed (an upper bound, counted without decoding)."""
    if max_values is None and max_containers is None:
        return None
    containers = raw.count(b"[") + raw.count(b"{")
    if max_containers is not None and containers > max_containers:
        return f"{where}: {containers:,} arrays and objects, over the limit of {max_containers:,}"
    values = raw.count(b",") + containers + 1
    if max_values is not None and values > max_values:
        return f"{where}: up to {values:,} values, over the limit of {max_values:,}"
    return None


def _check_depth(text: str, where: str, max_depth: int) -> None:
    # No deeper than it has opening brackets: a result (about 40 containers) skips the scan (bench/load.py).
    opened = text.count("[") + text.count("{")
    depth = nesting_depth(text) if opened > max_depth else opened
    if depth > max_depth:
        raise JsonInputError(f"{where}: nested {depth} levels deep, over the limit of {max_depth}")


def parse_json(text: str, where: str, max_depth: int = DEFAULT_MAX_DEPTH, allow_nan: bool = False) -> Any:
    """``text`` parsed under the depth and number rules above; errors name ``where``."""
    _check_depth(text, where, max_depth)
    try:
        return json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"{where}: not valid JSON (truncated?): {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:  # a refused constant, a number of too many digits
        raise JsonInputError(f"{where}: not usable JSON: {one_line(exc)}") from None


def read_json_text(path: Path, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
                   max_values: int | None = None, max_containers: int | None = None) -> str:
    """The text of ``path`` under every limit above but the parse's own (its numbers): for a reader whose typed
    model parses and validates in one step (``utils/result/file.py``). Raises :class:`JsonInputError`."""
    path = Path(path)
    shown = one_line(path, 400)
    try:
        raw = _read_bounded(path, max_bytes)
    except FileNotFoundError:
        raise JsonInputError(f"{shown}: no such file") from None
    except OSError as exc:
        raise JsonInputError(f"{shown}: unreadable: {exc.strerror or exc}") from None
    too_many = _count_problem(raw, shown, max_values, max_containers)
    if too_many:
        raise JsonInputError(too_many)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"{shown}: not UTF-8 text (byte {exc.start})") from None
    _check_depth(text, shown, max_depth)
    return text


def read_json(path: Path, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH,
              allow_nan: bool = False, max_values: int | None = None, max_containers: int | None = None) -> Any:
    """The JSON value in ``path``, read under the limits above. Raises :class:`JsonInputError`."""
    text = read_json_text(path, max_bytes, max_depth, max_values, max_containers)
    return parse_json(text, one_line(Path(path), 400), max_depth, allow_nan)
