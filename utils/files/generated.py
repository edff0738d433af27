"""What tprimat itself generates, and which folders may be treated as tprimat's at all.

Why: purge must delete only what tprimat's own writers named (``OUTPUT_DIR=.git`` must never empty a repository) and
wrap must pack only that; both refuse a root that cannot be an output or data folder (:func:`check_root`). Each writer
owns its name (``utils/result/names.py``, ``utils/dataset/paths.py``); this table only recognises them.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from utils.config.rules import DATASETS
from utils.io.hash_cache import CACHE_NAME
from utils.io.output_path import LOCK_DIR
from utils.result.names import FIXED_OUTPUT_FILES, GPU_CHECK_STEM, RESULT_NAME, is_output_file_name
from utils.spec.registry import model_names

_ALT = "|".join
_MODELS = _ALT(map(re.escape, model_names()))
TEMP_NAME = re.compile(r"\..+\.tmp-\d+.*|\.tprimat-write-probe-\d+(?:-renamed)?")
OUTPUT_FILES = FIXED_OUTPUT_FILES | {CACHE_NAME}
# The results database (evaluate/history/store.py): HISTORY_DB's default file, outside OUTPUT_DIR, and the
# application name its tprimat_meta table records (utils/files/purge.py deletes only a file that records it).
HISTORY_DEFAULT = "history/tprimat-history.sqlite"
HISTORY_APPLICATION = "tprimat-history"
HISTORY_SIDE_FILES = ("-journal", "-wal", "-shm")
# shell/gpu_check.sh's folder: one OUTPUT_DIR per check (prescreen, results, logs), all of it generated.
GPU_CHECK_DIR = GPU_CHECK_STEM
# Folders whose files tprimat names ``train_*`` (logs, generated configs, traces).
OUTPUT_JOB_DIRS = ("logs", "generated", "profiles")
_DATASET = rf"(?:{_ALT(DATASETS)}|local-[A-Za-z0-9_.-]+)"
DATASET_DIR_NAME = re.compile(_DATASET)
# valid.jsonl and ``-valid_text_document``: the held-out validation set (data/clean.py, data/encode.py; issue 34).
DATASET_FILES = frozenset({"raw.jsonl", "clean.jsonl", "valid.jsonl", "valid_raw.jsonl", "fetch.manifest.json",
                           "clean.manifest.json", CACHE_NAME})
ENCODED_NAME = re.compile(
    rf"{_DATASET}-(?:{_MODELS})(?:-valid)?_text_document\.(?:bin|idx|manifest\.json|verify\.json)")
TOKENIZER_NAME = re.compile(rf"(?:sample-)?(?:{_MODELS})(?:\.manifest\.json)?")
REPO_CACHES = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache"})


class RootError(ValueError):
    """A folder that tprimat must never treat as its output or data folder; one line naming it."""


@dataclass(frozen=True)
class Target:
    """One thing to delete: a file, or a folder (``tree``) that tprimat created as a whole."""

    path: Path
    tree: bool = False


def _is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _project_files(repo: Path, folder: Path) -> str | None:
    """A file of the project itself in ``folder`` (git's tracked files; else code near the top), or None."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), "ls-files", "--", str(folder)], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    if proc is not None and proc.returncode == 0:
        tracked = [line for line in proc.stdout.splitlines() if line and not line.endswith(".gitkeep")]
        return tracked[0] if tracked else None
    for depth in (folder.glob("*"), folder.glob("*/*")):
        for path in depth:
            if path.suffix in (".py", ".sh") and path.is_file():
                return str(path.relative_to(repo))
    return None


def check_root(path: Path, label: str, repo: Path, home: Path | None = None, given: str | None = None) -> Path:
    """``path`` resolved (links followed), refused (:class:`RootError`) when it cannot be tprimat's folder. ``given``
    (as the user wrote it) is checked for ``..`` before resolving. Refused: the filesystem root, the home folder or the
    repository or any folder holding them, a folder inside ``.git`` or ``.venv``, a git repository or virtualenv of its
    own, a folder of the project's own files (``OUTPUT_DIR=docs``)."""
    text = str(given if given is not None else path)
    if not text.strip():
        raise RootError(f"refusing {label}: the path is empty")
    if ".." in Path(text).parts:
        raise RootError(f"refusing {label}={text!r}: '..' components are not allowed")
    resolved = Path(os.path.realpath(Path(path).expanduser()))
    repo = Path(os.path.realpath(repo))
    home = Path(os.path.realpath(home or Path.home()))
    shown = f"{label}={text!r}" + ("" if str(resolved) == text else f" ({resolved})")
    if resolved == Path(resolved.anchor):
        raise RootError(f"refusing {shown}: it is the filesystem root")
    if _is_within(home, resolved):
        raise RootError(f"refusing {shown}: it is the home folder or holds it")
    if _is_within(repo, resolved):
        raise RootError(f"refusing {shown}: it is the repository or holds it")
    for special in (".git", ".venv"):
        if _is_within(resolved, repo / special):
            raise RootError(f"refusing {shown}: it is inside the repository's {special}")
    if (resolved / ".git").exists() or ((resolved / "HEAD").is_file() and (resolved / "objects").is_dir()):
        raise RootError(f"refusing {shown}: it is a git repository")
    if (resolved / "pyvenv.cfg").exists():
        raise RootError(f"refusing {shown}: it is a Python virtual environment")
    if _is_within(resolved, repo) and resolved.is_dir():
        found = _project_files(repo, resolved)
        if found:
            raise RootError(f"refusing {shown}: it holds the project's own files (e.g. {found}), not generated ones")
    return resolved


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as scan:
            return sorted(scan, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _real_dir(entry: os.DirEntry) -> bool:
    return entry.is_dir(follow_symlinks=False)


def _real_file(entry: os.DirEntry) -> bool:
    return entry.is_file(follow_symlinks=False)


def output_targets(root: Path) -> list[Target]:
    """What tprimat generated in an ``OUTPUT_DIR`` (links and unknown names are never included)."""
    found: list[Target] = []
    for entry in _entries(root):
        path = Path(entry.path)
        if _real_file(entry) and (is_output_file_name(entry.name) or entry.name in OUTPUT_FILES
                                  or TEMP_NAME.fullmatch(entry.name)):
            found.append(Target(path))
        elif _real_dir(entry) and entry.name in OUTPUT_JOB_DIRS:
            found += [Target(Path(e.path)) for e in _entries(path)
                      if _real_file(e) and (e.name.startswith("train_") or TEMP_NAME.fullmatch(e.name))]
        elif _real_dir(entry) and entry.name == "nemo":
            found += [Target(Path(e.path), tree=True) for e in _entries(path)
                      if _real_dir(e) and (e.name == "index_cache" or RESULT_NAME.fullmatch(e.name + ".json"))]
        elif _real_dir(entry) and entry.name in ("primus", LOCK_DIR, GPU_CHECK_DIR):
            found.append(Target(path, tree=True))
    return found


def data_targets(root: Path) -> list[Target]:
    """What the data stages generated in a ``DATA_DIR``."""
    found: list[Target] = []
    for entry in _entries(root):
        path = Path(entry.path)
        if _real_file(entry) and (ENCODED_NAME.fullmatch(entry.name) or entry.name == CACHE_NAME
                                  or TEMP_NAME.fullmatch(entry.name)):
            found.append(Target(path))
        elif _real_dir(entry) and DATASET_DIR_NAME.fullmatch(entry.name):
            found += [Target(Path(e.path)) for e in _entries(path)
                      if _real_file(e) and (e.name in DATASET_FILES or TEMP_NAME.fullmatch(e.name))]
        elif _real_dir(entry) and entry.name == "tokenizers":
            for e in _entries(path):
                if TOKENIZER_NAME.fullmatch(e.name) or TEMP_NAME.fullmatch(e.name) or e.name == CACHE_NAME:
                    if _real_dir(e):
                        found.append(Target(Path(e.path), tree=True))
                    elif _real_file(e):
                        found.append(Target(Path(e.path)))
        elif _real_dir(entry) and (entry.name in ("megatron_index_cache", LOCK_DIR) or TEMP_NAME.fullmatch(entry.name)):
            found.append(Target(path, tree=True))
    return found


def repo_targets(repo: Path, skip: tuple[Path, ...] = ()) -> list[Target]:
    """Caches and tprimat's temporary files in the repository (never inside .git, .venv or ``skip``)."""
    found: list[Target] = []
    pruned = {repo / ".git", repo / ".venv", *skip}
    for entry in _entries(repo):
        if entry.name in ("output.zip",) and _real_file(entry):
            found.append(Target(Path(entry.path)))
    for folder, dirs, files in os.walk(repo):
        here = Path(folder)
        kept = []
        for name in sorted(dirs):
            path = here / name
            if path in pruned or path.is_symlink():
                continue
            if name in REPO_CACHES:
                found.append(Target(path, tree=True))
            else:
                kept.append(name)
        dirs[:] = kept
        found += [Target(here / name) for name in sorted(files)
                  if TEMP_NAME.fullmatch(name) and not (here / name).is_symlink()]
    return found
