"""Read ``KEY=value`` files (``config.env``, ``secrets.env``) exactly as a POSIX shell reads them.

Why a shell's rules: people write these files in shell syntax, and a value read differently from what a shell would
assign is silently not the workload or token they wrote; what a shell would read differently (``$VAR``, an open quote,
``;``) is an error naming file, line and key. Departures, for what the writer meant: a CR before the line end and a
BOM are dropped, and unquoted words are one value (``MODELS=llama qwen``). ``secret=True`` keeps values unprinted.
"""

from __future__ import annotations

import re
from pathlib import Path

from utils.io.sanitise import one_line

_ASSIGNMENT = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")
_BLANKS = " \t"
# Characters a shell treats as syntax outside quotes; a value holding them unquoted is not one word.
_OPERATORS = ";&|<>()"
# Inside double quotes a backslash escapes only these (POSIX).
_DQ_ESCAPES = '$`"\\'


class EnvFileError(ValueError):
    """A line a shell would not read as one ``KEY=value`` assignment. Names file, line and key."""


def _value(rest: str, where: str, key: str) -> str:
    """The words after ``KEY=`` up to the line end or a ``# comment``, joined by single spaces."""
    words: list[str] = []
    i = 0
    while True:
        i += len(rest[i:]) - len(rest[i:].lstrip(_BLANKS))
        if i >= len(rest) or (rest[i] == "#" and i > 0):  # "#" after a blank starts a comment
            return " ".join(words)
        word, i = _word(rest, i, where, key)
        words.append(word)


def _word(rest: str, i: int, where: str, key: str) -> tuple[str, int]:
    """One shell word of ``rest`` starting at ``i``: its text (quotes removed) and where it ends."""
    out: list[str] = []
    n = len(rest)

    def fail(problem: str) -> EnvFileError:
        return EnvFileError(f"{where}: {one_line(key)}: {problem}")

    while i < n and rest[i] not in _BLANKS:
        char = rest[i]
        if char == "'":
            end = rest.find("'", i + 1)
            if end < 0:
                raise fail("unterminated single quote (values must fit on one line)")
            out.append(rest[i + 1:end])
            i = end + 1
        elif char == '"':
            i += 1
            while True:
                if i >= n:
                    raise fail("unterminated double quote (values must fit on one line)")
                char = rest[i]
                if char == '"':
                    i += 1
                    break
                if char == "\\" and i + 1 < n and rest[i + 1] in _DQ_ESCAPES:
                    out.append(rest[i + 1])
                    i += 2
                    continue
                if char in "$`":
                    raise fail("a shell would expand $ or ` here; put the value in single quotes")
                out.append(char)
                i += 1
        elif char == "\\":
            if i + 1 >= n:
                raise fail("a trailing backslash (line continuation) is not supported")
            out.append(rest[i + 1])
            i += 2
        elif char in "$`":
            raise fail("a shell would expand $ or ` here; put the value in single quotes")
        elif char in _OPERATORS:
            raise fail(f"unquoted {char!r} ends a shell command; quote the value")
        else:
            out.append(char)
            i += 1
    return "".join(out), i


def parse_env_text(text: str, source: str, secret: bool = False) -> dict[str, str]:
    """Assignments of ``text`` in file order (a later one wins, as in a shell)."""
    values: dict[str, str] = {}
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r").strip(_BLANKS)
        if not line or line.startswith("#"):
            continue
        where = f"{source}:{number}"
        match = _ASSIGNMENT.match(line)
        if not match:
            shown = "" if secret else f", got {one_line(raw.removesuffix(chr(13)))!r}"
            raise EnvFileError(f"{where}: expected KEY=value{shown}")
        key = match.group(1)
        values[key] = _value(line[match.end():], where, key)
    return values


def read_env_file(path: Path, secret: bool = False, label: str = "file") -> dict[str, str]:
    """Parse the file at ``path``; an unreadable one is an :class:`EnvFileError` naming it as ``label``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EnvFileError(f"{label} {path} is not UTF-8 text") from None
    except OSError as exc:
        raise EnvFileError(f"cannot read {label} {path}: {exc.strerror or exc}") from None
    return parse_env_text(text, str(path), secret=secret)
