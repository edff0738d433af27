"""sha256 of large files, hashed once and remembered until the file changes.

Why: a dataset is checked against its encode manifest by hash (an ``.bin`` edited in
place keeps its size, so sizes prove nothing), both by ``data/verify.py`` and before
every training job (``data/ready.py``). Hashing gigabytes before each job would cost
minutes, so each hash is cached beside the file with the file's identity when it was
hashed, and reused while that identity is unchanged.

Identity: size, inode, modification time and change time (all in nanoseconds). The
change time is set by the kernel on every write and every metadata change and cannot
be set back by a user, so an in-place edit is noticed even when the modification time
is restored afterwards (``touch -r``). A copied or moved dataset gets a new identity
and is hashed once more. The cache is one JSON file (``.tprimat-hashes.json``) in the
directory the caller names, replaced atomically; a lost update only costs a re-hash.
The hashing itself is ``utils/io/hashing.py``'s.
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
    """Hex sha256 of ``path``: from the cache while the file's identity is unchanged, else hashed and cached.

    The cache lives in ``cache_dir`` (default: the file's directory), which must contain
    ``path``; pass the directory a manifest lives in, so no cache file ever sits inside a
    directory that is hashed as a whole (a tokenizer's). A cache that cannot be written (a
    read-only data mount) only means hashing again next time.
    """
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
    """Record the sha256 of a file its writer hashed while writing it (``data/encoding/idx_writer.py``), as of now.

    Why: a writer that streamed the bytes through the hash already knows it; reading a
    multi-gigabyte file back only to hash it again is the cost this cache exists to avoid.
    Call it after the file's final rename (a rename changes the change time).
    """
    path = Path(path)
    cache_dir = Path(cache_dir) if cache_dir is not None else path.parent
    name = os.path.relpath(path.absolute(), cache_dir.absolute())
    if not name.startswith(".."):
        _store(cache_dir / CACHE_NAME, name, os.stat(path), digest)
