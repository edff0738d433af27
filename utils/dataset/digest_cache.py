"""The fed-sample digests already computed on this machine, kept across jobs and Pythons, keyed by what decides them.

Why: the preflight's samples digest costs a tokenizer load and the megatron-core import (25-37 s on the 2-core cpu
host), once per framework. The samples depend only on the encoded bytes, the tokenizer, SL, SEED, GBS, the dataset
size and the code (and Python) that builds them; :func:`entry_key` is a sha256 over exactly these, so an entry is
never stale, only unused. The large ``.bin``/``.idx`` enter by identity (as ``utils/io/hash_cache.py``), small
things by content. One JSON file per key under ``<DATA_DIR>/.tprimat/samples/`` (else ``OUTPUT_DIR``'s), written
atomically; a malformed entry is a miss, and only a successful digest is stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.dataset.paths import JobData
from utils.io.atomic import atomic_write_text
from utils.io.hashing import sha256_dir
from utils.machine.environment import installed_versions

STORE_PARTS = (".tprimat", "samples")
ENTRY_VERSION = 1
# Installed distributions whose code builds the reference samples (read from metadata: nothing is imported).
REFERENCE_DISTRIBUTIONS = ("megatron-core", "transformers", "tokenizers", "numpy")
# This repository's files that decide the samples or their digest.
REFERENCE_CODE = ("train/rules/samples.py", "utils/dataset/sample_digest.py", "utils/dataset/paths.py",
                  "train/settings/samples.py", "train/settings/sample_probe.py", "utils/dataset/framework_tokenizer.py")


@dataclass(frozen=True)
class Entry:
    """A stored digest: the value and the words the preflight records with it (kept verbatim)."""

    digest: str
    how: str


def file_identity(path: Path) -> dict[str, Any]:
    """A large file's identity for a key: resolved path, size, inode, modification and change time (ns)."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    return {"path": str(resolved), "size": stat.st_size, "inode": stat.st_ino, "device": stat.st_dev,
            "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns}


def files_digest(root: Path, relative: Iterable[str]) -> dict[str, str | None]:
    """sha256 of each file under ``root`` (None when absent)."""
    out: dict[str, str | None] = {}
    for name in relative:
        path = Path(root) / name
        out[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return out


def tree_digest(root: Path, folders: Iterable[str], suffix: str = ".py") -> str:
    """One sha256 over every ``suffix`` file below ``folders`` of ``root`` (names and bytes, sorted)."""
    digest = hashlib.sha256()
    for folder in folders:
        base = Path(root) / folder
        for path in sorted(base.rglob(f"*{suffix}")) if base.is_dir() else []:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class Window:
    """What decides a job's first samples besides its data: SL, SEED, GBS and, per split, (its dataset's size,
    how many samples the digest covers); ``valid`` is None where the job does not evaluate."""

    seq_len: int
    seed: int
    gbs: int
    train: tuple[int, int]
    valid: tuple[int, int] | None


def reference_key(data: JobData, window: Window, repo: Path) -> tuple[str, dict[str, Any]]:
    """(key, fields) of tran's samples of a job: the encoded sets, the tokenizer, the window, the code, the versions."""
    code = files_digest(repo, REFERENCE_CODE)
    splits = [(data.prefix, window.train)]
    if data.valid is not None and window.valid is not None:  # the digest covers the first validation samples too
        splits.append((data.valid, window.valid))
    found = [{"bin": file_identity(Path(f"{prefix}.bin")), "idx": file_identity(Path(f"{prefix}.idx")),
              "seq_len": window.seq_len, "seed": window.seed, "gbs": window.gbs, "dataset_samples": size,
              "samples": count, "code": code} for prefix, (size, count) in splits]
    tokenizer, versions = sha256_dir(data.tokenizer_dir), installed_versions(REFERENCE_DISTRIBUTIONS)
    for one in found:
        one.update(tokenizer_sha256=tokenizer, versions=versions)
    fields = {"kind": "reference", **found[0], **({"valid": found[1]} if len(found) > 1 else {})}
    return entry_key(fields), fields


def framework_key(framework: str, tokenizer_kind: str, reference: str, given: Path, python: str,
                  code_path: Path | None, code_folders: Iterable[str]) -> tuple[str, dict[str, Any]]:
    """(key, fields) of a framework's own samples: tran's key, the tokenizer it is given, its Python and its code."""
    fields = {"kind": framework, "reference": reference, "tokenizer_kind": tokenizer_kind,
              "code_path": str(code_path) if code_path else None,
              "code": tree_digest(code_path, code_folders) if code_path else None,
              "given_tokenizer_sha256": sha256_dir(Path(given)), "python": python_identity(python, os.environ)}
    return entry_key(fields), fields


def python_identity(python: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """A framework Python for a key: its path, the file it resolves to, its package folders' modification times (an
    install changes them) and ``PYTHONPATH``, so a different transformers gives a new key without starting it."""
    given = Path(python)
    resolved = given.resolve()
    folders = {}
    for root in {given.parent.parent, resolved.parent.parent}:
        for site in sorted(root.glob("lib/python3*/site-packages")) + sorted(root.glob("lib/python3/dist-packages")):
            folders[str(site)] = site.stat().st_mtime_ns
    stat = resolved.stat()
    return {"python": str(given), "resolved": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "site_packages": folders, "pythonpath": environ.get("PYTHONPATH", "")}


def entry_key(fields: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``fields``."""
    text = json.dumps({"version": ENTRY_VERSION, **fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def store_folder(data_dir: Path, output_dir: Path) -> Path | None:
    """Where entries go: the data folder's ``.tprimat/samples``, else the output folder's, else None."""
    for base in (data_dir, output_dir):
        folder = Path(base).joinpath(*STORE_PARTS)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    return None


class DigestStore:
    """The entries of one folder (None: a store that keeps nothing)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key}.json"

    def get(self, key: str) -> Entry | None:
        """The stored entry of ``key``, or None (absent, unreadable or malformed: computed again)."""
        path = self.path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        digest, how = data.get("digest"), data.get("how")
        if not (isinstance(digest, str) and digest.startswith("sha256:") and isinstance(how, str)):
            return None
        return Entry(digest, how)

    def put(self, key: str, entry: Entry, fields: Mapping[str, Any]) -> None:
        """Store ``entry`` atomically with the fields of its key (for a reader); a failed write only costs a
        recomputation next time."""
        path = self.path(key)
        if path is None:
            return
        record = {"key": key, "digest": entry.digest, "how": entry.how, "fields": dict(fields)}
        with contextlib.suppress(OSError):
            atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
