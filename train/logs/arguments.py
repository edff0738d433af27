"""Megatron-LM's arguments block: the parser of its format, and the typed values a workload needs.

Megatron-LM and Primus print every parsed argument once at start (``_print_args`` in
``megatron/training/arguments.py``): two spaces, the dest name, ``48 - len(name)`` dots, a space and
``str(value)``. The dot count is checked, so another rank's line in the middle of the block is not taken for an
argument. Values stay text until asked for, so an unusual value never stops the scan.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

BLOCK_START = re.compile(r"^-{3,} arguments -{3,}\s*$")
BLOCK_END = re.compile(r"^-{3,} end of arguments -{3,}\s*$")
# Two leading spaces as printed; a wrapper may have eaten them (a ``[rank0]: `` tag's separator), so 0-2 are
# accepted: the dot count is what tells an argument line.
ARG_LINE = re.compile(r"^ {0,2}([A-Za-z_][A-Za-z0-9_]*) (\.*)(?: (.*))?$")
NAME_COLUMN = 48  # name + dots fill this many characters in Megatron's block
MAX_ARGUMENTS = 10_000  # Megatron has under a thousand; a bound keeps a corrupt block from growing without end


@dataclass
class ArgumentsReader:
    """Feed it the lines of a log (prefixes stripped); it keeps the first complete arguments block. A later block (a
    restarted job appending to the same log) that disagrees is reported in ``warnings``."""

    values: dict[str, str] = field(default_factory=dict)
    line_no: int | None = None  # where the kept block starts
    complete: bool = False
    warnings: list[str] = field(default_factory=list)
    blocks: int = 0
    _current: dict[str, str] | None = None
    _start: int = 0
    _stray: int = 0

    @property
    def found(self) -> bool:
        return self.line_no is not None

    def feed(self, message: str, line_no: int) -> bool:
        """Take one line; True when it belonged to an arguments block (start, argument or end)."""
        if self._current is None:
            if BLOCK_START.match(message):
                self._current, self._start, self._stray = {}, line_no, 0
                return True
            return False
        if BLOCK_END.match(message):
            self._close(complete=True)
            return True
        match = ARG_LINE.match(message)
        if match and _dots_fit(match.group(1), match.group(2)) and len(self._current) < MAX_ARGUMENTS:
            self._current[match.group(1)] = (match.group(3) or "").strip()
            return True
        if BLOCK_START.match(message):  # a new block before this one ended: keep what was read
            self._close(complete=False)
            return self.feed(message, line_no)
        self._stray += 1
        return False

    def finish(self) -> None:
        """End of the log: a block still open was cut off."""
        if self._current is not None:
            self._close(complete=False)

    def _close(self, complete: bool) -> None:
        block, self._current = self._current or {}, None
        self.blocks += 1
        if not complete:
            self.warnings.append(f"the arguments block at line {self._start} has no end line (log cut off?): "
                                 f"{len(block)} argument(s) read")
        if self._stray:
            self.warnings.append(f"{self._stray} line(s) inside the arguments block at line {self._start} were "
                                 "not arguments (other ranks' output): ignored")
        if not self.found:
            self.values, self.line_no, self.complete = block, self._start, complete
            return
        differing = sorted(k for k in set(block) | set(self.values) if block.get(k) != self.values.get(k))
        if differing:
            shown = ", ".join(differing[:5]) + (" ..." if len(differing) > 5 else "")
            self.warnings.append(f"a second arguments block at line {self._start} differs from the first "
                                 f"(line {self.line_no}) in {shown}: the first is used")


def _dots_fit(name: str, dots: str) -> bool:
    return len(dots) == max(NAME_COLUMN - len(name), 0)


def arg_text(values: dict[str, str], name: str) -> str | None:
    """The printed value, or None when absent or printed as ``None``."""
    text = values.get(name)
    return None if text is None or text == "None" else text


def arg_int(values: dict[str, str], name: str) -> int | None:
    text = arg_text(values, name)
    if text is None or not re.fullmatch(r"[-+]?\d+", text):
        return None
    return int(text)


def arg_float(values: dict[str, str], name: str) -> float | None:
    text = arg_text(values, name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def arg_bool(values: dict[str, str], name: str) -> bool | None:
    return {"True": True, "False": False}.get(values.get(name, ""))
