"""Discovery: the runs in a folder of copied logs (``amd-logs/``, ``nvi-logs/``...), grouped per run.

A TensorBoard directory is one run; a text file is a candidate log, recognised later by content. Per-rank and
per-node logs are grouped by their paths with the rank or node number taken out, rank 0 first, where the arguments
block is printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from train.logs.patterns import is_event_file
from train.logs.scan import not_a_text_log

RANK_TOKEN = re.compile(r"(rank|node)([-_]?)(\d+)", re.IGNORECASE)
PRIMUS_LEVEL_FILES = frozenset({"debug.log", "info.log", "warning.log", "error.log"})
PRIMUS_RANK_DIR = re.compile(r"rank-\d+")
TORCHRUN_ATTEMPT = re.compile(r"attempt_\d+")
TORCHRUN_FILES = frozenset({"stdout.log", "stderr.log"})


@dataclass
class RunFiles:
    """The files of one run: ``key`` names it (its path with rank numbers as ``*``)."""

    key: str
    kind: str  # log | tensorboard
    files: list[Path] = field(default_factory=list)


@dataclass
class Discovery:
    runs: list[RunFiles] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    files_seen: int = 0


def run_key(relative: Path) -> str:
    """The name of the run a log belongs to: its relative path with rank and node numbers as ``*``."""
    parts = list(relative.parts)
    if (len(parts) >= 3 and parts[-1] in TORCHRUN_FILES and parts[-2].isdigit()
            and TORCHRUN_ATTEMPT.fullmatch(parts[-3])):
        parts = [*parts[:-2], "*"]
    elif len(parts) >= 2 and parts[-1] in PRIMUS_LEVEL_FILES and PRIMUS_RANK_DIR.fullmatch(parts[-2]):
        parts = [*parts[:-2], "rank-*"]
    return RANK_TOKEN.sub(lambda m: f"{m.group(1)}{m.group(2)}*", "/".join(parts))


def rank_order(relative: Path) -> tuple[int, str]:
    """Sort key: the first rank or node number in the path (torchrun: the local-rank directory), then the name."""
    parts = relative.parts
    if len(parts) >= 2 and parts[-1] in TORCHRUN_FILES and parts[-2].isdigit():
        return int(parts[-2]), str(relative)
    match = RANK_TOKEN.search(str(relative))
    return (int(match.group(3)) if match else 0), str(relative)


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        found += [Path(directory) / name for name in sorted(files) if not name.startswith(".")]
    return found


def discover(root: Path, progress: Callable[[str], None] | None = None) -> Discovery:
    """Candidate runs under ``root`` (content is checked when each run is analysed) and files skipped already."""
    root = Path(root)
    found = Discovery()
    groups: dict[tuple[str, str], RunFiles] = {}
    for path in _walk(root):
        found.files_seen += 1
        relative = path.relative_to(root)
        if path.is_symlink() or not path.is_file():
            found.skipped.append((path, "not a regular file (a link, FIFO or device)"))
            continue
        if is_event_file(path):
            key = (str(relative.parent / "events.*"), "tensorboard")
        else:
            try:
                reason = not_a_text_log(path)
            except OSError as exc:
                reason = f"unreadable: {exc.strerror or exc}"
            if reason:
                found.skipped.append((path, reason))
                continue
            key = (run_key(relative), "log")
        groups.setdefault(key, RunFiles(key[0], key[1])).files.append(path)
    for group in groups.values():
        group.files.sort(key=lambda p: rank_order(p.relative_to(root)))
        found.runs.append(group)
    if progress is not None:
        progress(f"{found.files_seen} file(s) under {root}: {len(found.runs)} candidate run(s), "
                 f"{len(found.skipped)} skipped before reading")
    return found
