"""Pack ``OUTPUT_DIR`` into ``output.zip``: only what tprimat wrote, never a secret.

Why Python: the archive must never follow a link to ``secrets.env`` nor miss a token written with a trailing comment
or CRLF. So every secret value ``utils/config/secret.py`` reads is compared as exact bytes, no link is followed
(``O_NOFOLLOW``), a file holding a secret makes wrap refuse (naming the file, never the value), only a folder with
tprimat's marker and only names ``utils.files.generated.output_targets`` knows are packed, and the archive is renamed
into place only when complete. CLI (``shell/wrap.sh``): ``python -m utils.files.wrap``; exit 1 on refusal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from utils.config.cli import OneLineFailure, exits_on_config_error
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.config.secret import SECRET_KEYS, read_secret_bytes
from utils.files.generated import TEMP_NAME, RootError, check_root, output_targets
from utils.io.atomic import atomic_path
from utils.io.output_path import LOCK_DIR
from utils.io.sanitise import one_line
from utils.result.names import NOT_MARKED, OUTPUT_MARKER, is_output_dir

CHUNK = 1 << 20
# Shorter values would match by accident and protect nothing (a token is tens of characters).
MIN_SECRET_CHARS = 8


class WrapRefused(RuntimeError):
    """The output folder cannot be packed as it is; the message names the files, never a secret."""


@dataclass
class Contents:
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    not_ours: list[str] = field(default_factory=list)  # regular files tprimat did not write: left out
    env_files: list[str] = field(default_factory=list)


def secret_values() -> list[bytes]:
    """Every value of every secret tprimat uses, from the environment and ``secrets.env`` both (an exported token
    must not hide another in the file); values too short to be tokens left out."""
    values: list[bytes] = []
    for key in SECRET_KEYS:
        for value in (read_secret_bytes(key), read_secret_bytes(key, environ={})):  # environment, secrets.env
            if value and len(value) >= MIN_SECRET_CHARS and value not in values:
                values.append(value)
    return values


def _umask() -> int:
    """This process's umask (read by setting it back at once; the CLI is single-threaded)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_env_file(name: str) -> bool:
    return name.endswith(".env") or "secrets.env" in name


def _ours(root: Path) -> tuple[set[Path], tuple[Path, ...]]:
    """The files and the whole folders tprimat generated in ``root`` (its bookkeeping folder excluded)."""
    targets = [t for t in output_targets(root) if t.path.name != LOCK_DIR and not TEMP_NAME.fullmatch(t.path.name)]
    return {t.path for t in targets if not t.tree}, tuple(t.path for t in targets if t.tree)


def collect(root: Path) -> Contents:
    """The files under ``root`` to pack: regular, written by tprimat, readable by others; links never followed."""
    found = Contents()
    files_ours, trees_ours = _ours(root)
    # Under a umask that withholds other-read (077), every file tprimat wrote lacks the bit: then the bit says
    # nothing about a file made private on purpose, and the user's own results are packed (issue 33: none was).
    private_by_default = bool(_umask() & stat.S_IROTH)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        for name in sorted(dirs):
            if (here / name).is_symlink():
                found.skipped.append(f"{(here / name).relative_to(root)} (a link to {os.readlink(here / name)}; "
                                     "links are never followed)")
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink() and not (here == root and d == LOCK_DIR))
        for name in sorted(files):
            path = here / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found.skipped.append(f"{path.relative_to(root)} (a link to {os.readlink(path)}; "
                                     "links are never followed)")
            elif not stat.S_ISREG(mode):
                found.skipped.append(f"{path.relative_to(root)} (not a regular file)")
            elif TEMP_NAME.fullmatch(name) or name == ".gitkeep":
                continue
            elif _is_env_file(name):
                found.env_files.append(str(path.relative_to(root)))
            elif path not in files_ours and not any(tree in path.parents for tree in trees_ours):
                found.not_ours.append(str(path.relative_to(root)))
            elif not mode & stat.S_IROTH and not private_by_default:
                found.skipped.append(f"{path.relative_to(root)} (not readable by other users: mode "
                                     f"{stat.S_IMODE(mode):04o}; a private file is never packed)")
            else:
                found.files.append(path)
    return found


@contextlib.contextmanager
def _open_no_follow(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is no longer a regular file")
        yield fd
    finally:
        os.close(fd)


def _chunks(fd: int) -> Iterator[bytes]:
    while block := os.read(fd, CHUNK):
        yield block


class _Scanner:
    """Finds any of ``needles`` in a byte stream fed in pieces (a match may span two pieces)."""

    def __init__(self, needles: list[bytes]) -> None:
        self.needles = needles
        self.keep = max((len(n) for n in needles), default=1) - 1
        self.tail = b""
        self.found = False

    def feed(self, block: bytes) -> None:
        window = self.tail + block
        if any(needle in window for needle in self.needles):
            self.found = True
        self.tail = window[-self.keep:] if self.keep else b""


def _leaks(path: Path, rel: str, secrets: list[bytes]) -> bool:
    if any(secret in rel.encode() for secret in secrets):
        return True
    scanner = _Scanner(secrets)
    with _open_no_follow(path) as fd:
        for block in _chunks(fd):
            scanner.feed(block)
            if scanner.found:
                return True
    return False


def check(root: Path, contents: Contents, secrets: list[bytes]) -> None:
    """Refuse env files and files holding a secret, naming each (never the value)."""
    if contents.env_files:
        raise WrapRefused(f"refusing to pack env files (they may hold secrets): {', '.join(contents.env_files)}")
    if not secrets:
        return
    leaking = [str(p.relative_to(root)) for p in contents.files if _leaks(p, str(p.relative_to(root)), secrets)]
    if leaking:
        raise WrapRefused(f"refusing to pack: these files contain a secret value (not shown): {', '.join(leaking)}")


def write_archive(root: Path, contents: Contents, archive: Path, secrets: list[bytes]) -> int:
    """Zip the files as ``<root name>/<path>``, scanning again as they are read; returns the archive's size."""
    with atomic_path(archive) as tmp, zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        for path in contents.files:
            rel = path.relative_to(root)
            scanner = _Scanner(secrets)
            info = zipfile.ZipInfo.from_file(path, f"{root.name}/{rel}")
            info.compress_type = zipfile.ZIP_DEFLATED
            with _open_no_follow(path) as fd, zipped.open(info, "w") as member:
                for block in _chunks(fd):
                    scanner.feed(block)
                    if scanner.found:
                        raise WrapRefused(f"refusing to pack: {rel} gained a secret value while being packed")
                    member.write(block)
    return archive.stat().st_size


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="shell/wrap.sh (python -m utils.files.wrap)",
        description="Pack OUTPUT_DIR into output.zip at the repository root: only a folder tprimat wrote into (it "
        f"holds {OUTPUT_MARKER}), only the files tprimat names (results, step records, logs, generated configs, "
        "traces, comparisons), only files other users may read. Links are never followed (each is skipped with a "
        "line); env files and files containing a secret (HF_TOKEN's bytes as the secrets loader reads them: "
        "environment, else secrets.env) make it refuse, naming the files but never the value.")
    parser.parse_args(argv)

    with OneLineFailure("wrap", (RootError, WrapRefused), cannot="pack") as failure:
        cfg = load_config()
        given = os.environ.get("OUTPUT_DIR", "").strip() or None
        root = check_root(cfg.output_dir, "OUTPUT_DIR", REPO_ROOT, given=given)
        if root.is_dir() and not is_output_dir(root):
            raise RootError(f"refusing OUTPUT_DIR={one_line(root, 300)}: {NOT_MARKED}")
        contents = collect(root) if root.is_dir() else Contents()
        for line in contents.skipped:
            print(f"wrap: skipped {one_line(line, 400)}", file=sys.stderr)
        if contents.not_ours:
            shown = ", ".join(one_line(name, 80) for name in contents.not_ours[:5])
            more = f" and {len(contents.not_ours) - 5} more" if len(contents.not_ours) > 5 else ""
            print(f"wrap: left out {len(contents.not_ours)} file(s) tprimat did not write: {shown}{more}",
                  file=sys.stderr)
        if not contents.files:
            print(f"wrap: {root} has no results to pack; run ./shell/run_train.sh first", file=sys.stderr)
            return 1
        secrets = secret_values()
        check(root, contents, secrets)
        archive = REPO_ROOT / "output.zip"
        size = write_archive(root, contents, archive, secrets)
    if failure.status:
        return failure.status
    print(f"wrap: wrote {archive} ({len(contents.files)} files, {size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
