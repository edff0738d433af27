"""The one gate of a result read from elsewhere: every reader of result files reads through :func:`admit`.

Why one owner: a check kept by one reader is bypassed by the next. In one call: a regular file read strictly
(:func:`utils.result.file.read_result`), figures that can be true (:func:`utils.measure.plausible.implausible`), and
a ``PROFILE=mlperf`` verdict MLPerf's checker gives again on the MLLOG beside the result. Compare leaves a refused
file out, validate lists its reasons, ``history add`` stores it as refused, the gate refuses the candidate.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from utils.io.sanitise import one_line
from utils.measure.plausible import implausible
from utils.result.file import ResultError, read_result
from utils.result.mllog import RULESET_OF_RECORD, check, mllog_path
from utils.schema.model import Result


class Unreadable(ResultError):
    """Not a readable regular file at all: a directory, a FIFO, a symlink loop, no permission."""


class Refused(ResultError):
    """A schema-valid result that cannot be true: ``result`` is it, ``reasons`` why (one line each)."""

    def __init__(self, where: str, result: Result, reasons: list[str]):
        super().__init__(f"{where}: cannot be true, left out: {'; '.join(reasons)}")
        self.result, self.reasons = result, reasons


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def unusable_reason(path: Path) -> str | None:
    """Why ``path`` is no regular file, before opening it (None: it is): a FIFO never blocks a reader."""
    shown = one_line(path, 400)
    try:
        mode = os.stat(path).st_mode  # follows links: a loop or a dangling link fails here
    except FileNotFoundError:
        return f"{shown}: unreadable: a symlink to a missing file" if os.path.islink(path) else f"{shown}: no such file"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{shown}: unreadable: a symlink loop"
        return f"{shown}: unreadable: {exc.strerror or exc}"
    for test, what in _KINDS:
        if test(mode):
            return f"{shown}: unreadable: {what}, not a result file"
    return None


def _mlperf(result: Result, path: Path | None) -> list[str]:
    """The recorded MLPerf verdict against MLPerf's checker on the MLLOG beside the result (empty: they agree)."""
    block = result.mlperf
    if block is None or block.verdict is None or path is None:
        return []
    recorded = f"its MLPerf verdict {block.verdict}"
    mllog = mllog_path(path)
    if unusable_reason(mllog) is not None:
        return [f"{recorded} cannot be re-checked: no readable MLLOG {one_line(mllog.name, 200)} beside it"]
    again = check(mllog, block.ruleset_of_record or RULESET_OF_RECORD)  # a forged ruleset fails the checker
    if again.verdict != block.verdict:
        return [f"{recorded}, but MLPerf's checker on {one_line(mllog.name, 200)} says "
                f"{again.verdict or one_line(again.reason, 200)}"]
    return []


def refusals(result: Result, path: Path | None = None) -> list[str]:
    """Why a schema-valid result cannot be true (empty: it can); ``path``: its file (None: built in memory)."""
    return [*implausible(result), *_mlperf(result, path)]


def admit(path: Path, shown: str | None = None) -> Result:
    """The result at ``path``, read and checked; else :class:`ResultError` (:class:`Unreadable`, :class:`Refused`)."""
    path = Path(path)
    reason = unusable_reason(path)
    if reason is not None:
        raise Unreadable(reason)
    where = one_line(shown or path, 400)
    try:
        result = read_result(path)
    except MemoryError:  # a file too big for memory is one file's problem (a 510 MB result ended compare)
        raise ResultError(f"{where}: too large to read into memory") from None
    except RecursionError:
        raise ResultError(f"{where}: nested too deep to read") from None
    reasons = refusals(result, path)
    if reasons:
        raise Refused(where, result, reasons)
    return result
