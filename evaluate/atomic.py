"""Atomic output files: write a temp file in the target directory, then rename.

A report or figure that is interrupted half-way must not replace a good one with
a truncated file; ``os.replace`` within one directory is atomic on POSIX.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any


def _temp_in(path: Path) -> tuple[int, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def write_text(path: Path, text: str) -> Path:
    path = Path(path)
    fd, tmp = _temp_in(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def save_figure(figure: Any, path: Path, dpi: int = 110) -> Path:
    """``figure.savefig`` through a temp file; the format comes from ``path``'s suffix."""
    path = Path(path)
    fd, tmp = _temp_in(path)
    os.close(fd)
    try:
        figure.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png", bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
