"""Where published runs are read from: a results tree on disk, an archive of one, or one MLLOG file; all bounded.

A run is ``<submitter>/results/<system>/<benchmark>/result_<n>.txt``, its system ``<submitter>/systems/<system>.json``;
every file is placed by the last parts of its path, so a clone, a folder inside one, one log or an archive all read.
Everything is foreign input: regular files of at most :data:`MAX_FILE_BYTES`, links never followed, and an archive
member that is unsafe or compressed past :data:`MAX_RATIO` refused in one line, never extracted.
"""

from __future__ import annotations

import os
import re
import stat
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from utils.io.json_input import _read_bounded
from utils.io.sanitise import one_line

MAX_FILE_BYTES = 64 * 2**20  # the largest v5.1 Llama 3.1 8B log is under 1 MB
MAX_MEMBERS = 200_000
MAX_ARCHIVE_BYTES = 4 * 2**30
MAX_RATIO = 1000  # MLLOG lines compress about 10-30x; a member past this is a bomb
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
RUN_LOG = re.compile(r"result_\d+\.txt")
ROUND = re.compile(r"training_results_v(\d+\.\d+)")
SKIPPED_FOLDERS = ("benchmarks",)


@dataclass(frozen=True)
class Ref:
    """One file: ``shown`` names it in a message (a path or ``archive:member``), ``read`` gives its bytes."""

    shown: str
    read: Callable[[], bytes]
    path: Path | None = None  # on disk (its system description is looked for up from it)


@dataclass(frozen=True)
class RunRef:
    """One run's log: where it sits in a results tree (None for a log outside one) and the file."""

    ref: Ref
    submitter: str | None = None
    system: str | None = None
    benchmark: str | None = None
    name: str | None = None

    @property
    def place(self) -> str:
        """The log's place inside the results repository (never a path of this machine)."""
        if self.submitter is None:
            return PurePosixPath(self.ref.shown).name
        return f"{self.submitter}/results/{self.system}/{self.benchmark}/{self.name}"


@dataclass
class Found:
    """Every run, system description and score normalisation the paths hold, and each refusal (one line)."""

    runs: list[RunRef] = field(default_factory=list)
    systems: dict[tuple[str, str], Ref] = field(default_factory=dict)
    scaling: dict[tuple[str, str, str], Ref] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    rounds: set[str] = field(default_factory=set)
    _seen: set[tuple[str, ...]] = field(default_factory=set)

    def add(self, parts: tuple[str, ...], ref: Ref, loose: bool = False) -> None:
        """Place a file by the last parts of its path; a file of no known place is passed over (``loose``: a log
        given by name outside any tree is a run of its own)."""
        self.rounds.update(m.group(1) for part in parts for m in [ROUND.fullmatch(part)] if m)
        tail = parts[-5:]
        if len(tail) == 5 and tail[1] == "results" and RUN_LOG.fullmatch(tail[4]):
            key = tail
            if key in self._seen:
                self.refused.append(f"{ref.shown}: refused: the same place as a run read already")
                return
            self._seen.add(key)
            self.runs.append(RunRef(ref, tail[0], tail[2], tail[3], tail[4]))
        elif len(tail) == 5 and tail[1] == "results" and tail[4] == "scaling.json":
            self.scaling.setdefault((tail[0], tail[2], tail[3]), ref)
        elif len(parts) >= 3 and parts[-2] == "systems" and parts[-1].endswith(".json"):
            self.systems.setdefault((parts[-3], parts[-1][: -len(".json")]), ref)
        elif loose or parts[-1].endswith(".mllog"):
            self.runs.append(RunRef(ref))


def _disk(path: Path) -> Ref:
    return Ref(one_line(path, 300), lambda: _read_bounded(path, MAX_FILE_BYTES), path)


def _walk(top: Path, found: Found) -> None:
    base, first = Path(os.path.abspath(top)), len(found.runs)
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIPPED_FOLDERS)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            found.add(path.parts, _disk(path))
    _beside(found, first)


def _beside(found: Found, first: int) -> None:
    """The system description and scaling.json of each log on disk from ``first`` on, wherever the walk began (a
    system's folder or a run's log was given)."""
    for run in found.runs[first:]:
        log = run.ref.path
        if log is None or run.submitter is None:
            continue
        for path in (log.parents[3] / "systems" / f"{run.system}.json", log.parent / "scaling.json"):
            if path.is_file() and not path.is_symlink():
                found.add(path.parts, _disk(path))


def _name_problem(name: str) -> str | None:
    posix = PurePosixPath(name)
    if posix.is_absolute() or ".." in posix.parts or "\\" in name or one_line(name, 10**6) != name:
        return "an absolute, '..', backslash or control-character member name"
    return None


def _bounded(handle, budget: list[int]) -> bytes:  # type: ignore[no-untyped-def]
    chunks, size = [], 0
    while block := handle.read(1 << 20):
        size += len(block)
        budget[0] -= len(block)
        if size > MAX_FILE_BYTES or budget[0] < 0:
            raise ValueError(f"over the {MAX_FILE_BYTES:,}-byte limit of a member, or the archive's "
                             f"{MAX_ARCHIVE_BYTES:,} bytes")
        chunks.append(block)
    return b"".join(chunks)


def _member(found: Found, shown: str, name: str, problem: str | None, read: Callable[[], bytes]) -> None:
    where = f"{shown}:{one_line(name, 200)}"
    problem = problem or _name_problem(name)
    if problem:
        found.refused.append(f"{where}: refused: {problem}")
        return
    found.add(PurePosixPath(name).parts, Ref(where, read))


def _zip(path: Path, found: Found, shown: str) -> None:
    archive = zipfile.ZipFile(path)
    members = archive.infolist()
    if len(members) > MAX_MEMBERS:
        raise ValueError(f"{len(members):,} members, over the limit of {MAX_MEMBERS:,}")
    budget = [MAX_ARCHIVE_BYTES]
    for info in members:
        if info.is_dir():
            continue
        problem = ("a symbolic link" if stat.S_ISLNK(info.external_attr >> 16) else "encrypted" if info.flag_bits & 1
                   else f"{info.file_size:,} bytes" if info.file_size > MAX_FILE_BYTES
                   else "compressed past a bomb's ratio" if info.compress_size
                   and info.file_size / info.compress_size > MAX_RATIO else None)

        def read(info: zipfile.ZipInfo = info) -> bytes:
            with archive.open(info) as handle:
                return _bounded(handle, budget)

        _member(found, shown, info.filename, problem, read)


def _tar(path: Path, found: Found, shown: str) -> None:
    """A tar is read once, in order (a compressed stream cannot seek): the wanted members' bytes are kept."""
    budget = [MAX_ARCHIVE_BYTES]
    with tarfile.open(path, "r:*") as archive:
        for count, info in enumerate(archive, 1):
            if count > MAX_MEMBERS:
                raise ValueError(f"over {MAX_MEMBERS:,} members")
            if info.isdir():
                continue
            problem = None if info.isreg() else "a link or a device, not a regular file"
            wanted = problem is None and _name_problem(info.name) is None and _wanted(PurePosixPath(info.name).parts)
            data = _bounded(archive.extractfile(info), budget) if wanted else b""
            _member(found, shown, info.name, problem, lambda data=data: data)


def _wanted(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    return bool(RUN_LOG.fullmatch(name)) or name == "scaling.json" or name.endswith(".mllog") or (
        len(parts) >= 2 and parts[-2] == "systems" and name.endswith(".json"))


def find(paths: list[Path]) -> Found:
    """Everything the paths hold; a path that cannot be read is one refusal, the others are still read."""
    found = Found()
    for path in paths:
        shown = one_line(path, 300)
        found.rounds.update(m.group(1) for m in ROUND.finditer(str(path)))
        try:
            if path.is_dir():
                _walk(path, found)
            elif not path.is_file():
                found.refused.append(f"{shown}: no such file or folder")
            elif path.name.lower().endswith(ARCHIVE_SUFFIXES):
                (_zip if zipfile.is_zipfile(path) else _tar)(path, found, shown)
            else:
                first, absolute = len(found.runs), Path(os.path.abspath(path))
                found.add(absolute.parts, _disk(absolute), loose=True)
                _beside(found, first)
        except (OSError, ValueError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
            found.refused.append(f"{shown}: not readable: {one_line(exc)}")
    return found
