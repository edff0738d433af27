"""Atomic outputs: write under a temporary sibling name, rename into place only when complete.

An interrupted write must never replace a good file with a truncated one (``os.replace`` within a folder is atomic
on POSIX). Temporary names start with a dot (``.<name>.tmp-<pid>``) so scans for outputs skip them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def temp_sibling(final: Path, suffix: str = "") -> Path:
    """``.<name>.tmp-<pid><suffix>`` next to ``final``: hidden, per process, same filesystem."""
    final = Path(final)
    return final.with_name(f".{final.name}.tmp-{os.getpid()}{suffix}")


@contextlib.contextmanager
def atomic_path(final: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary sibling of ``final``; rename it into place only if the block succeeds. ``suffix`` keeps an
    extension on the temporary name for writers that infer the format from it. On failure the temporary file is removed
    and ``final`` is untouched."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(final, suffix)
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_text(final: Path, text: str, fsync: bool = False) -> Path:
    """Write ``text`` to ``final`` atomically; ``fsync`` also forces it to disk before the rename."""
    with atomic_path(final) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        if fsync:
            handle.flush()
            os.fsync(handle.fileno())
    return Path(final)
