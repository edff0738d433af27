"""Before any training starts: can the output directory take a run's results at all?

Why: a run whose result cannot be written loses everything it measured. So before the first job ``OUTPUT_DIR`` must
be a writable directory with room (:data:`MIN_FREE_BYTES`, :data:`MIN_FREE_INODES`: floors, not estimates). A disk
that fills mid-run is handled where the result is written: the old file or a failed result stays.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import uuid
from pathlib import Path

from utils.config.cli import OneLineFailure, exits_on_config_error
from utils.config.load import load_config
from utils.io.output_path import LOCK_DIR
from utils.io.sanitise import one_line

MIN_FREE_BYTES = 64 * 1024 * 1024
MIN_FREE_INODES = 1024
_PROBE_BYTES = 4096


class OutputDirError(OSError):
    """The directory cannot take outputs; the message is one line naming it."""


def _size(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(value)


def _reason(exc: BaseException) -> str:
    return one_line(getattr(exc, "strerror", None) or exc, 300)


def _probe_write(folder: Path) -> None:
    """Create, write, sync and rename a probe file in ``folder`` as an atomic result write does; remove it. The name is
    random, not the pid: nodes sharing ``OUTPUT_DIR`` may have the same pid."""
    probe = folder / f".tprimat-write-probe-{uuid.uuid4().hex}"
    final = probe.with_name(probe.name + "-renamed")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\0" * _PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(probe, final)
    finally:
        for left in (probe, final):
            with contextlib.suppress(OSError):
                left.unlink()


def check_writable_dir(path: Path, label: str = "OUTPUT_DIR", min_free_bytes: int | None = None) -> Path:
    """Make sure ``path`` is a writable directory with ``min_free_bytes`` (default :data:`MIN_FREE_BYTES`) of room.
    Creates it (and its parents) when missing; returns it. Raises :class:`OutputDirError` with one line."""
    path = Path(path)
    min_free_bytes = MIN_FREE_BYTES if min_free_bytes is None else min_free_bytes
    where = f"{label}={one_line(path, 400)}"
    try:
        if path.exists() and not path.is_dir():
            raise OutputDirError(f"{where} is not a directory; point {label} at a directory")
        path.mkdir(parents=True, exist_ok=True)
    except OutputDirError:
        raise
    except (OSError, ValueError) as exc:
        raise OutputDirError(f"{where} cannot be created: {_reason(exc)}") from None
    # What a result write does (create, write, sync, rename) in the folder and its bookkeeping folder: any failure
    # refuses the folder before a job runs. A missing bookkeeping folder is not made: a check that made and removed
    # it raced another node's check of a shared OUTPUT_DIR.
    bookkeeping = path / LOCK_DIR
    for folder in (path, bookkeeping) if os.path.lexists(bookkeeping) else (path,):
        try:
            if not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            _probe_write(folder)
        except (OSError, ValueError) as exc:
            shown = where if folder == path else f"{where}: its bookkeeping folder {LOCK_DIR}"
            raise OutputDirError(f"{shown} is not writable: {_reason(exc)}") from None
    try:
        stats = os.statvfs(path)
    except OSError as exc:
        raise OutputDirError(f"{where}: cannot read its free space: {exc.strerror or exc}") from None
    free = stats.f_bavail * stats.f_frsize
    if free < min_free_bytes:
        raise OutputDirError(f"{where} has only {_size(free)} free; a run needs at least {_size(min_free_bytes)} "
                             "for its logs and results (free some space or point it elsewhere)")
    if stats.f_files and stats.f_favail < MIN_FREE_INODES:
        raise OutputDirError(f"{where} has only {stats.f_favail} free inodes (one per file); a run needs at least "
                             f"{MIN_FREE_INODES} for its logs and results (delete files or point it elsewhere)")
    return path


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.files.disk",
        description="Check that the configured OUTPUT_DIR can take a run's results before any training starts.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-output", help="OUTPUT_DIR is a writable directory (created if missing) with room")
    check.add_argument("--min-free-mb", type=float, default=MIN_FREE_BYTES / 2**20,
                       help=f"room required, in MiB (default {MIN_FREE_BYTES // 2**20})")
    args = parser.parse_args(argv)

    cfg = load_config()
    if not (args.min_free_mb >= 0 and args.min_free_mb < 2**40):
        print(f"utils.files.disk: --min-free-mb {args.min_free_mb}: must be a number of MiB from 0 up", file=sys.stderr)
        return 2
    with OneLineFailure("tprimat", (OutputDirError,)) as failure:
        check_writable_dir(cfg.output_dir, "OUTPUT_DIR", int(args.min_free_mb * 2**20))
    return failure.status


if __name__ == "__main__":
    sys.exit(main())
