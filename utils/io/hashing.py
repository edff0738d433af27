"""sha256 helpers: the one way tprimat hashes files, directories and JSON values.

Why one module: the data manifests (``data/manifest.py``) and every result's fingerprints
(``utils/dataset/fingerprint.py``) must hash the same bytes the same way. Files are read in chunks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

PREFIX = "sha256:"


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        while block := stream.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_dir(path: Path) -> str:
    """One hex hash over the relative names and contents of every file in a directory (a tokenizer)."""
    path = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + sha256_file(file).encode())
    return digest.hexdigest()


def hash_json(value: Any) -> str:
    """``sha256:<hex>`` of canonical JSON (sorted keys, no whitespace), so key order never matters."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_files(paths: Iterable[Path], file_hash: Callable[[Path], str] | None = None) -> str | None:
    """``sha256:<hex>`` over several files (names and contents, not directories); None if any is missing. ``file_hash``
    gives one file's hex sha256 (default :func:`sha256_file`; the fingerprint of a dataset passes
    ``utils.io.hash_cache.cached_sha256`` so a large ``.bin`` is read once)."""
    file_hash = file_hash or sha256_file
    digest = hashlib.sha256()
    for path in paths:
        if not Path(path).is_file():
            return None
        digest.update(Path(path).name.encode() + b"\0" + (PREFIX + file_hash(Path(path))).encode() + b"\0")
    return PREFIX + digest.hexdigest()
