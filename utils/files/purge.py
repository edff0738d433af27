"""Delete what tprimat generated, and nothing else, whatever ``OUTPUT_DIR`` and ``DATA_DIR`` say.

Generated means a name in ``utils/files/generated.py``'s table under a root checked there first. Links are never
followed nor deleted, folders go only when tprimat created them whole or they are left empty, every target is checked
again right before it goes, and a root whose lock a running job holds is refused. CLI: ``shell/purge.sh``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

from utils.config.cli import OneLineFailure, exits_on_config_error
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.files.generated import (
    HISTORY_APPLICATION,
    HISTORY_DEFAULT,
    HISTORY_SIDE_FILES,
    RootError,
    Target,
    check_root,
    data_targets,
    output_targets,
    repo_targets,
)
from utils.files.locks import locked_by
from utils.io.output_path import LOCK_DIR
from utils.io.sanitise import one_line
from utils.result.names import NOT_MARKED, is_output_dir

# Folders of a root that are removed once purging leaves them empty.
_EMPTY_AFTER = ("logs", "generated", "profiles", "nemo", "tokenizers")


class PurgeError(RuntimeError):
    """Purge refuses to run; one line."""


def _is_history_file(path: Path) -> bool:
    """Whether ``path`` is a SQLite file whose ``tprimat_meta`` names tprimat's history (read-only look)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=1)) as conn:
            row = conn.execute("SELECT value FROM tprimat_meta WHERE key = 'application'").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == HISTORY_APPLICATION


def history_targets(value: str | None, repo: Path) -> list[Target]:
    """``--with-history``: HISTORY_DB's SQLite file (and its journal files) when it is tprimat's history. A PostgreSQL
    database is never dropped by purge; a file that is a link, or no tprimat history, is refused."""
    text = (value or "").strip()
    if text.lower() in ("off", "none", "false", "0"):
        return []
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if not scheme.lower().startswith("sqlite"):
            raise PurgeError("--with-history: HISTORY_DB is a database server; purge never drops one (remove its "
                             "tables with the server's own tools)")
        text = rest[1:] if rest.startswith("/") else rest
    path = Path(text).expanduser() if text else repo / HISTORY_DEFAULT
    path = path if path.is_absolute() else repo / path  # relative to the repository, as OUTPUT_DIR
    if not os.path.lexists(path):
        return []
    if path.is_symlink() or not path.is_file() or not _is_history_file(path):
        raise PurgeError(f"--with-history: {path} is not a tprimat history database; left alone")
    siblings = [Path(f"{path}{suffix}") for suffix in HISTORY_SIDE_FILES]
    return [Target(path)] + [Target(p) for p in siblings if p.is_file() and not p.is_symlink()]


def _running_job(root: Path, label: str) -> None:
    for lock in sorted((root / LOCK_DIR).glob("*.lock")):
        holder = locked_by(lock)
        if holder:
            raise PurgeError(f"refusing to purge {label}={root}: {holder} is writing there now ({lock})")


def plan_purge(repo: Path, output_dir: Path, data_dir: Path, with_data: bool, home: Path | None = None,
               given: dict[str, str] | None = None) -> list[tuple[Path, Target]]:
    """(root, target) pairs to delete: the output's, the data's ``with_data``, and the repository's caches. ``given``
    holds the folders as the user wrote them (``..`` is refused before resolving)."""
    given = given or {}
    roots = [("OUTPUT_DIR", output_dir)] + ([("DATA_DIR", data_dir)] if with_data else [])
    planned: list[tuple[Path, Target]] = []
    for label, folder in roots:
        root = check_root(folder, label, repo, home, given.get(label))
        _running_job(root, label)
        targets = output_targets(root) if label == "OUTPUT_DIR" else data_targets(root)
        if label == "OUTPUT_DIR" and targets and not is_output_dir(root):
            raise PurgeError(f"refusing to purge OUTPUT_DIR={one_line(root, 300)}: {NOT_MARKED}; nothing removed")
        planned += [(root, target) for target in targets]
    repo = Path(os.path.realpath(repo))
    # Never into the output or data folders (each has its own rules above), purged or not.
    skip = tuple(Path(os.path.realpath(folder)) for folder in (output_dir, data_dir))
    planned += [(repo, target) for target in repo_targets(repo, skip)]
    return planned


def _still_safe(root: Path, target: Target) -> bool:
    """Right before deleting: a real file or folder (not a link), whose real parent lies within ``root``."""
    path = target.path
    if path.is_symlink() or not (path.is_file() or path.is_dir()):
        return False
    parent = Path(os.path.realpath(path.parent))
    return parent == root or root in parent.parents


def _show(path: Path, repo: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(repo))
    return str(path)


def purge(planned: list[tuple[Path, Target]], repo: Path, dry_run: bool) -> int:
    """Delete (or with ``dry_run`` list) the planned targets; returns how many went."""
    removed = 0
    for root, target in planned:
        if not _still_safe(root, target):
            print(f"purge: skipped {_show(target.path, repo)} (changed since it was listed)", file=sys.stderr)
            continue
        if dry_run:
            print(f"would remove {_show(target.path, repo)}")
            removed += 1
            continue
        if target.tree:
            shutil.rmtree(target.path)
        else:
            target.path.unlink()
        removed += 1
    if not dry_run:
        for root in dict.fromkeys(root for root, _ in planned):
            for name in _EMPTY_AFTER:
                with contextlib.suppress(OSError):
                    (root / name).rmdir()  # only when empty, and never a link (rmdir refuses one)
    return removed


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shell/purge.sh (python -m utils.files.purge)",
        description="Remove what tprimat generated: results, logs, generated configs, traces, the comparison, "
        "locks and temporary files in OUTPUT_DIR, output.zip and Python/tool caches in the repository; with "
        "--with-data also the data stages' files in DATA_DIR. Nothing else is touched, whatever the folders "
        "hold or the variables say; links are never followed.")
    parser.add_argument("--with-data", action="store_true",
                        help="also the datasets, manifests, tokenizers and index caches in DATA_DIR")
    parser.add_argument("--with-history", action="store_true",
                        help="also the results database HISTORY_DB names, when it is a tprimat SQLite history file "
                             "(a PostgreSQL database is never dropped)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    args = parser.parse_args(argv)

    with OneLineFailure("purge", (RootError, PurgeError), cannot="remove") as failure:
        cfg = load_config()
        given = {key: os.environ[key] for key in ("OUTPUT_DIR", "DATA_DIR") if os.environ.get(key, "").strip()}
        planned = plan_purge(REPO_ROOT, cfg.output_dir, cfg.data_dir, args.with_data, given=given)
        if args.with_history:
            planned += [(target.path.parent.resolve(), target) for target in history_targets(cfg.history_db, REPO_ROOT)]
        if not planned:
            print("purge: nothing to remove")
            return 0
        removed = purge(planned, REPO_ROOT, args.dry_run)
    if failure.status:
        return failure.status
    if not args.dry_run:
        print(f"purge: removed {removed} item(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
