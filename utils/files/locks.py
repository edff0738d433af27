"""One writer at a time: a lock file that names its holder.

Why: two preparations of one ``DATA_DIR``, or two launchers of one result, race on the same names; a second writer
must fail at once saying who holds the lock, and a killed holder must not block the next run. A non-blocking
``fcntl.flock`` (released by the kernel however the holder exits) on a file under ``<dir>/.tprimat/`` that names the
holder; a normal release empties it, so content found by the next taker means a killed holder. The file stays:
deleting it while open would let two holders in. A shell script holds a lock for its children through
``acquire --fd N`` and ``TPRIMAT_LOCK_FDS=N``. Within one process a lock is re-entrant.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.io.output_path import LOCK_DIR

INHERITED_FDS_ENV = "TPRIMAT_LOCK_FDS"
_UNSUPPORTED = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)

# Locks this process holds: path -> (descriptor, depth); a nested hold of the same lock is re-entrant.
_HELD: dict[Path, list[int]] = {}


class LockHeld(RuntimeError):
    """Another process holds the lock; the message names it."""


class LockError(OSError):
    """The lock file cannot be created or locked (an unwritable directory, say); one line naming it."""


def data_lock_path(data_dir: Path) -> Path:
    """The lock of data preparation in ``DATA_DIR`` (one writer per data directory)."""
    return Path(data_dir) / LOCK_DIR / "data.lock"


def result_lock_path(result_path: Path) -> Path:
    """The lock of one result file (one launcher writes it)."""
    result_path = Path(result_path)
    return result_path.parent / LOCK_DIR / f"{result_path.name}.lock"


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as written into the lock file (one ``key=value`` line each)."""

    pid: int
    host: str
    started: str
    command: str

    @classmethod
    def me(cls, command: str | None = None, pid: int | None = None) -> Holder:
        return cls(pid=pid or os.getpid(), host=socket.gethostname(),
                   started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   command=command or shlex.join([os.path.basename(sys.executable), *sys.argv]))

    def text(self) -> str:
        return f"pid={self.pid}\nhost={self.host}\nstarted={self.started}\ncommand={self.command}\n"

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder a lock file names, or None when it is empty or not one of ours."""
        fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        try:
            holder = cls(pid=int(fields["pid"]), host=fields["host"], started=fields.get("started", "?"),
                         command=fields.get("command", "?"))
        except (KeyError, ValueError):
            return None
        return holder if holder.pid > 0 else None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, since {self.started}: {self.command}"

    def alive_here(self) -> bool | None:
        """True/False for a process on this host; None when it runs elsewhere (cannot be checked)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while block := os.read(fd, 4096):
        chunks.append(block)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, text.encode("utf-8"))


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LockError(exc.errno, f"cannot create the lock file {path}: {exc.strerror or exc}") from None


def _inherited_fd(path: Path) -> int | None:
    """A descriptor named in ``TPRIMAT_LOCK_FDS`` that is open on this very lock file, if any."""
    try:
        wanted = os.stat(path)
    except OSError:
        return None
    for word in os.environ.get(INHERITED_FDS_ENV, "").replace(",", " ").split():
        if not word.isdigit():
            continue
        with contextlib.suppress(OSError):
            found = os.fstat(int(word))
            if (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
                return int(word)
    return None


def _held_message(path: Path, what: str, holder: Holder | None, detail: str = "") -> str:
    who = holder.describe() if holder else "another process (the lock file names none)"
    return f"{what} is locked by {who} (lock {path}){detail}; wait for it to finish or stop it first"


def lock_fd(fd: int, path: Path, what: str, holder: Holder) -> str | None:
    """Lock ``fd`` (open on ``path``) for ``holder``; returns a takeover note or None. Raises LockHeld."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        supported = True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LockHeld(_held_message(path, what, Holder.parse(_read(fd)))) from None
        if exc.errno not in _UNSUPPORTED:
            raise LockError(exc.errno, f"cannot lock {path}: {exc.strerror or exc}") from None
        supported = False
    previous = Holder.parse(_read(fd))
    note = None
    if previous is not None and previous.pid != holder.pid:
        alive = previous.alive_here()
        if not supported and alive is not False:
            detail = "" if alive else " (on another host, so it cannot be checked; remove the file if it is stale)"
            raise LockHeld(_held_message(path, what, previous, detail))
        note = f"note: took over the lock {path} left by {previous.describe()} (no longer running)"
    _write(fd, holder.text())
    return note


def lock_descriptor(fd: int, path: Path, what: str, holder: Holder) -> str | None:
    """Lock descriptor ``fd``, which the calling shell opened on ``path`` and keeps: the lock lasts as long as it does.
    Returns a takeover note or None; raises LockHeld, or LockError when ``fd`` is not open on ``path``."""
    found, wanted = os.fstat(fd), os.stat(path)
    if (found.st_dev, found.st_ino) != (wanted.st_dev, wanted.st_ino):
        raise LockError(errno.EBADF, f"descriptor {fd} is not open on {path}")
    return lock_fd(fd, path, what, holder)


@contextlib.contextmanager
def hold(path: Path, what: str, command: str | None = None) -> Iterator[None]:
    """Hold the lock at ``path`` for the block (``what`` names the guarded thing in messages). :class:`LockHeld` at once
    when another process holds it, :class:`LockError` when the file cannot be created; an inherited lock
    (``TPRIMAT_LOCK_FDS``) is used as it is and left to its owner."""
    path = Path(path).absolute()
    if path in _HELD:
        _HELD[path][1] += 1
        try:
            yield
        finally:
            _HELD[path][1] -= 1
        return
    inherited = _inherited_fd(path)
    if inherited is not None:
        lock_fd(inherited, path, what, Holder.parse(_read(inherited)) or Holder.me(command))
        yield  # the shell that opened it releases it
        return
    fd = _open(path)
    try:
        note = lock_fd(fd, path, what, Holder.me(command))
    except BaseException:
        os.close(fd)
        raise
    if note:
        print(note, file=sys.stderr)
    _HELD[path] = [fd, 1]
    try:
        yield
    finally:
        del _HELD[path]
        release_fd(fd)
        os.close(fd)


def locked_by(path: Path) -> str | None:
    """Who holds the lock at ``path`` right now (a description), or None when nobody does."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            holder = Holder.parse(_read(fd))
            return holder.describe() if holder else "another process"
        return None
    finally:
        os.close(fd)  # closing releases a lock taken just now
    return None


def release_fd(fd: int) -> None:
    """Empty the lock file (a normal end: nothing to take over) and unlock it."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------
# CLI (for shell scripts that hold a lock for their children)


def _data_lock() -> tuple[Path, str]:
    data_dir = load_config().data_dir
    return data_lock_path(data_dir), f"DATA_DIR {data_dir}"


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.files.locks", description=__doc__.split("\n\n")[0],
        epilog="A shell holds DATA_DIR's lock for its children: lock=$(python -m utils.files.locks path data); "
        "exec 9<>\"$lock\"; python -m utils.files.locks acquire data --fd 9 --holder-pid $$ --command CMD; "
        "export TPRIMAT_LOCK_FDS=9; ...; python -m utils.files.locks release --fd 9.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_path = sub.add_parser("path", help="print the lock file of DATA_DIR (from the config) or of the result "
                            "FILE, creating its folder")
    p_path.add_argument("kind", choices=("data", "result"))
    p_path.add_argument("file", nargs="?", type=Path, help="the result file (kind result)")
    p_acq = sub.add_parser("acquire", help="lock descriptor FD (open on the lock file) for the calling shell")
    p_acq.add_argument("kind", choices=("data",))
    p_acq.add_argument("--holder-pid", type=int, required=True, help="the shell's pid ($$), recorded as holder")
    p_acq.add_argument("--command", required=True, help="the holder's command, recorded for messages")
    p_rel = sub.add_parser("release", help="empty and unlock descriptor FD (the shell's normal end)")
    for p in (p_acq, p_rel):
        p.add_argument("--fd", type=int, required=True, help="a descriptor the calling shell opened on the lock file")
    args = parser.parse_args(argv)
    result_file = getattr(args, "file", None)
    if args.command == "path" and (args.kind == "result") != (result_file is not None):
        parser.error("path result needs the result FILE, path data none")
    try:
        if args.command == "release":
            release_fd(args.fd)
            return 0
        path, what = (result_lock_path(result_file).absolute(), "the result") if result_file else _data_lock()
        if args.command == "path":
            path.parent.mkdir(parents=True, exist_ok=True)
            print(path)
            return 0
        note = lock_descriptor(args.fd, path, what, Holder.me(args.command, pid=args.holder_pid))
        if note:
            print(note, file=sys.stderr)
    except (LockHeld, LockError) as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"tprimat: lock{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
