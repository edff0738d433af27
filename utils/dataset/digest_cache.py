"""The fed-sample digests already computed on this machine, kept across jobs and Pythons, keyed by what decides them.

Why: the preflight's samples digest costs a tokenizer load and the megatron-core import (25-37 s on the 2-core cpu
host), once per framework. The samples depend only on the encoded bytes, the tokenizer, SL, SEED, GBS, the dataset
size and the code (and Python) that builds them; :func:`entry_key` is a sha256 over exactly these, so an entry is
never stale, only unused. The large ``.bin``/``.idx`` enter by identity (as ``utils/io/hash_cache.py``), small
things by content. One JSON file per key under ``<DATA_DIR>/.tprimat/samples/`` (else ``OUTPUT_DIR``'s), written
atomically; a malformed entry is a miss, and only a successful digest is stored.

A job's digest is planned here once (:func:`digest_plan`: the window, the keys, what the store holds, the tokenizer's
facts where samples must be built) and what was computed is kept by one call (:func:`keep_digests`), so the
preflight (``train/settings/samples.py``) hands plain values down instead of asking for each part in turn.
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

from utils.config.model import Config
from utils.dataset.framework_tokenizer import framework_tokenizer
from utils.dataset.paths import JobData, eod_id, vocab_size
from utils.dataset.sample_digest import FedSample, digest_samples, first_difference, global_sample_count
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


def job_window(cfg: Config, data: JobData) -> Window:
    """The job's window. Validation (where ``data`` has its held-out set): Megatron's size
    (``get_train_valid_test_num_samples``, ``megatron/training/training.py:2709-2726`` at 847781764f; NeMo's
    ``PreTrainingDataModule.build`` the same: an evaluation every EVAL_INTERVAL_STEPS steps plus the one after
    training), which decides the epochs its shuffle covers; the digest covers its first EVAL_SAMPLES, the fixed
    held-out set every evaluation reads on tran, deep and nemo (issue 50)."""
    valid = None
    if data.valid is not None:
        valid = ((cfg.train_iters // cfg.eval_interval_steps + 1) * cfg.eval_samples, cfg.eval_samples)
    return Window(cfg.sl, cfg.seed, cfg.gbs, (cfg.train_iters * cfg.gbs, global_sample_count(cfg.gbs)), valid)


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


@dataclass(frozen=True)
class FrameworkSide:
    """A framework whose own dataset code builds its samples: what keys them besides tran's (:func:`framework_key`)."""

    framework: str
    tokenizer_kind: str
    python: str
    code_path: Path | None
    code_folders: tuple[str, ...]


@dataclass(frozen=True)
class Keyed:
    """One digest's key, the fields it is made of, and its stored entry (None: to compute)."""

    key: str
    fields: dict[str, Any]
    entry: Entry | None


@dataclass(frozen=True)
class DigestPlan:
    """What a job's samples digest needs, resolved once from its config and data (:func:`digest_plan`).

    ``answer``: the digest and its words where no samples need building (the data not here, or a stored entry
    answers); else the samples are built with ``window`` and ``facts`` (vocabulary size, EOD), or ``unreadable``
    says why tran's cannot be. ``given``: the tokenizer the framework is handed, or ``given_error`` why not.
    """

    data: JobData
    window: Window
    store: DigestStore
    answer: tuple[str | None, str] | None
    reference: Keyed | None = None
    side: FrameworkSide | None = None
    framework: Keyed | None = None
    given: Path | None = None
    given_error: Exception | None = None
    facts: tuple[int, int] | None = None
    unreadable: Exception | None = None


def digest_plan(cfg: Config, data: JobData, side: FrameworkSide | None, repo: Path) -> DigestPlan:
    """The plan of a job's digest: the data's presence, the window, the store and what it holds for tran's samples
    and (``side``) the framework's own. The tokenizer is read only where samples must be built: a stored digest
    costs no tokenizer load (nor the megatron-core import of building them)."""
    window = job_window(cfg, data)
    missing = data.missing()
    if missing:  # nothing is created for data that is not here (no store folder either)
        return DigestPlan(data, window, DigestStore(None),
                          (None, f"no samples digest: {', '.join(map(str, missing))} not here"))
    store = DigestStore(store_folder(cfg.data_dir, cfg.output_dir))
    key, fields = reference_key(data, window, repo)
    reference = Keyed(key, fields, store.get(key))
    framework, given, given_error, answer = None, None, None, reference.entry
    if side is not None:
        try:
            given, _ = framework_tokenizer(data.tokenizer_dir, cfg.output_dir)
        except Exception as exc:  # a tokenizer tran cannot read either is said as tran's failure (samples_digest)
            given_error = exc
        else:
            framework_digest, framework_fields = framework_key(side.framework, side.tokenizer_kind, key, given,
                                                               side.python, side.code_path, side.code_folders)
            framework = Keyed(framework_digest, framework_fields, store.get(framework_digest))
        answer = framework.entry if framework is not None else None
    facts, unreadable = None, None
    if answer is None:
        try:
            tokenizer = data.tokenizer
            facts = (vocab_size(tokenizer), eod_id(tokenizer))
        except Exception as exc:  # unreadable tokenizer: data/ready.py reports it before a real launch
            unreadable = exc
    return DigestPlan(data, window, store, None if answer is None else (answer.digest, answer.how), reference, side,
                      framework, given, given_error, facts, unreadable)


@dataclass(frozen=True)
class Kept:
    """What :func:`keep_digests` answers: the job's entry, or how the framework's samples differ from tran's."""

    entry: Entry
    difference: str | None = None


def keep_digests(plan: DigestPlan, ours: list[FedSample] | None, ours_how: str, theirs: list[FedSample] | None,
                 theirs_entry: Entry | None) -> Kept:
    """Store tran's digest where it was built here, then judge the framework's (``theirs_entry``, its digest and
    words): equal, it is stored and answered; different, the first difference is named (tran's samples
    ``ours`` where built, else only that the digests differ) and nothing of the framework's is kept."""
    assert plan.reference is not None, "only a plan without an answer has samples to keep"
    reference = plan.reference.entry
    if reference is None:
        assert ours is not None, "tran's samples are built where none are stored"
        reference = Entry(digest_samples(ours), ours_how)
        plan.store.put(plan.reference.key, reference, plan.reference.fields)
    if theirs is None or theirs_entry is None or plan.framework is None:
        return Kept(reference)
    if theirs_entry.digest != reference.digest:
        difference = first_difference(theirs, ours) if ours is not None else "their digest differs from tran's"
        if difference is not None:
            return Kept(theirs_entry, difference)
    plan.store.put(plan.framework.key, theirs_entry, plan.framework.fields)
    return Kept(theirs_entry)
