"""sha256 of large files, hashed once and remembered until the file changes.

Why: datasets are checked against their manifest by hash before every job, and hashing gigabytes each time would cost
minutes. The cache keys on size, inode, mtime and ctime (ns): a user cannot set the ctime back, so ``touch -r`` is seen.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from utils.io.atomic import atomic_path
from utils.io.hashing import sha256_file
from utils.io.json_input import read_json

CACHE_NAME = ".tprimat-hashes.json"
_VERSION = 1


def _identity(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns]


def _load(cache: Path) -> dict[str, Any]:
    try:  # bounded like every JSON tprimat reads (utils/io/json_input.py); a bad cache only means hashing again
        data = read_json(cache, max_bytes=64 * 2**20)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def cached_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """Hex sha256 of ``path``: from the cache while the file's identity is unchanged, else hashed and cached. The cache
    lives in ``cache_dir`` (default: the file's folder, which must contain ``path``): pass a manifest's folder, so no
    cache file sits inside a folder hashed as a whole. An unwritable cache only costs a re-hash."""
    path = Path(path)
    cache_dir = Path(cache_dir) if cache_dir is not None else path.parent
    name = os.path.relpath(path.absolute(), cache_dir.absolute())
    if name.startswith(".."):
        return sha256_file(path)
    before = os.stat(path)
    cache = cache_dir / CACHE_NAME
    entry = _load(cache).get(name)
    if isinstance(entry, dict) and entry.get("identity") == _identity(before) and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = sha256_file(path)
    after = os.stat(path)
    if _identity(after) != _identity(before):
        return digest  # changed while being hashed: cache neither version
    _store(cache, name, after, digest)
    return digest


def _store(cache: Path, name: str, stat: os.stat_result, digest: str) -> None:
    files = _load(cache)  # re-read: another process may have added entries meanwhile
    files[name] = {"identity": _identity(stat), "sha256": digest}
    with contextlib.suppress(OSError), atomic_path(cache) as tmp:
        tmp.write_text(json.dumps({"version": _VERSION, "files": files}, indent=1) + "\n", encoding="utf-8")


def remember_sha256(path: Path, digest: str, cache_dir: Path | None = None) -> None:
    """Record the sha256 a writer computed while streaming the file (``data/encoding/idx_writer.py``), so it is
    never read back only to be hashed. Call it after the file's final rename (a rename changes the change time)."""
    path = Path(path)
    cache_dir = Path(cache_dir) if cache_dir is not None else path.parent
    name = os.path.relpath(path.absolute(), cache_dir.absolute())
    if not name.startswith(".."):
        _store(cache_dir / CACHE_NAME, name, os.stat(path), digest)
