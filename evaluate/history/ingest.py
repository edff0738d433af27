"""Adding results: from files, folders and ``output.zip`` archives, read as untrusted input, in one transaction.

Every file goes through ``utils.result.admit.admit``; archive members are never extracted by name, only read into
memory under the same limits. Everything is read before the write lock is taken; the inserts are one transaction with
``ON CONFLICT (content_hash) DO NOTHING``, so a result added twice is stored once.
"""

from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from evaluate.analysis.results import RESULT_GLOB, find_result_files
from evaluate.history.query import tag_name
from evaluate.history.record import RunRecord, make_record
from evaluate.history.store import Database, runs, series, tags
from utils.io.json_input import DEFAULT_MAX_BYTES
from utils.io.sanitise import one_line
from utils.result.admit import Refused, admit
from utils.result.file import ResultError, now_iso
from utils.result.names import MLLOG_SUFFIX

MAX_MEMBERS = 200_000
MAX_ARCHIVE_BYTES = 8 * 2**30
MAX_RATIO = 200  # results are JSON of numbers: they compress about 5-10x, never 200x
_CHUNK = 500


@dataclass
class Collected:
    """Records read from the inputs, and the one-line reason of every input refused."""

    records: list[RunRecord] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _record(path: Path, source: str, collected: Collected) -> None:
    """The stored form of the result at ``path`` into ``collected``; a problem is a :class:`ResultError`."""
    try:
        result, refused = admit(path, source), None
    except Refused as exc:
        result, refused = exc.result, "; ".join(exc.reasons)
    try:
        collected.records.append(make_record(result, source, refused))
    except (ValueError, TypeError, OverflowError) as exc:  # a valid result the database cannot hold as it is
        raise ResultError(f"{one_line(source, 400)}: cannot be stored: {one_line(exc)}") from None


def _read_file(path: Path, source: str, collected: Collected) -> None:
    try:
        _record(path, source, collected)
    except ResultError as exc:
        collected.refused.append(one_line(exc, 600))


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name = PurePosixPath(info.filename)
    if name.is_absolute() or ".." in name.parts or "\\" in info.filename:
        return "an absolute or '..' member name"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "a symbolic link"
    if info.flag_bits & 0x1:
        return "encrypted"
    if info.file_size > DEFAULT_MAX_BYTES:
        return f"{info.file_size:,} bytes, over the {DEFAULT_MAX_BYTES:,}-byte limit"
    if info.compress_size and info.file_size / info.compress_size > MAX_RATIO:
        return f"compressed {info.file_size / info.compress_size:.0f}:1, past the {MAX_RATIO}:1 a result reaches"
    return None


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's bytes, never more than the limit whatever its header claims."""
    chunks, size = [], 0
    with archive.open(info) as handle:
        while block := handle.read(1 << 20):
            size += len(block)
            if size > DEFAULT_MAX_BYTES:
                raise ValueError(f"over the {DEFAULT_MAX_BYTES:,}-byte limit")
            chunks.append(block)
    return b"".join(chunks)


def _read_archive(path: Path, collected: Collected, workdir: Path) -> None:
    shown = one_line(path, 300)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        collected.refused.append(f"{shown}: not a readable zip archive: {one_line(exc)}")
        return
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            collected.refused.append(f"{shown}: {len(members):,} members, over the limit of {MAX_MEMBERS:,}")
            return
        if sum(m.file_size for m in members) > MAX_ARCHIVE_BYTES:
            collected.refused.append(f"{shown}: over {MAX_ARCHIVE_BYTES:,} bytes uncompressed")
            return
        wanted = [m for m in members if not m.is_dir() and PurePosixPath(m.filename).match(RESULT_GLOB)]
        by_name = {m.filename: m for m in members}
        if not wanted:
            collected.refused.append(f"{shown}: no {RESULT_GLOB} member")
        for info in wanted:
            where = f"{shown}:{one_line(info.filename, 200)}"
            problem = _member_problem(info)
            if problem is None:
                try:  # and the MLLOG beside a PROFILE=mlperf result, which backs its verdict (utils/result/admit.py)
                    data = _read_member(archive, info)
                    mllog = by_name.get(str(PurePosixPath(info.filename).with_suffix(MLLOG_SUFFIX)))
                    beside = _read_member(archive, mllog) if mllog and _member_problem(mllog) is None else None
                except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, EOFError) as exc:
                    problem = f"unreadable: {one_line(exc)}"
            if problem is not None:
                collected.refused.append(f"{where}: {problem}")
                continue
            member = workdir / "member.json"
            member.with_suffix(MLLOG_SUFFIX).unlink(missing_ok=True)  # the last member's
            for file, content in ((member, data), (member.with_suffix(MLLOG_SUFFIX), beside)):
                if content is None:
                    continue
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(content)
            try:
                _record(member, where, collected)
            except ResultError as exc:  # the reader names the temporary file: name the member instead
                collected.refused.append(f"{where}: {str(exc).split(': ', 1)[-1]}")


def collect(paths: Iterable[Path]) -> Collected:
    """Read every result the paths hold: a folder's ``train_*.json``, a zip archive's members, or a file."""
    collected = Collected()
    with tempfile.TemporaryDirectory(prefix="tprimat-history-") as tmp:
        for path in paths:
            path = Path(path)
            if path.is_dir():
                found = find_result_files(path)
                if not found:
                    collected.refused.append(f"{one_line(path, 300)}: no {RESULT_GLOB} file in this folder")
                for file in found:
                    _read_file(file, str(file), collected)
            elif path.is_file() and zipfile.is_zipfile(path):
                _read_archive(path, collected, Path(tmp))
            else:
                _read_file(path, str(path), collected)
    return collected


@dataclass(frozen=True)
class Added:
    added: int
    present: int
    run_ids: list[int]


def _chunks(items: list, size: int = _CHUNK) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _insert(db: Database):  # type: ignore[no-untyped-def]
    return sqlite.insert if db.target.sqlite else postgresql.insert


def add_records(db: Database, records: list[RunRecord], tag_names: Iterable[str] = ()) -> Added:
    """Store ``records`` in one transaction (a record already there is kept once): new, present, and every run id."""
    names = sorted({tag_name(t) for t in tag_names if t})
    unique: dict[str, RunRecord] = {}
    for record in records:
        unique.setdefault(record.content_hash, record)
    stamp = now_iso()
    insert = _insert(db)
    ids: dict[str, int] = {}
    added = 0
    with db.write() as conn:
        for chunk in _chunks(list(unique.values())):
            rows = [{**r.run, "added_at": stamp, "run_time": r.run["run_time"] or stamp} for r in chunk]
            statement = insert(runs).on_conflict_do_nothing(index_elements=["content_hash"])
            new = dict(conn.execute(statement.returning(runs.c.content_hash, runs.c.id), rows).tuples().all())
            if new:
                conn.execute(insert(series).on_conflict_do_nothing(index_elements=["run_id"]),
                             [{**r.series, "run_id": new[r.content_hash]} for r in chunk if r.content_hash in new])
            added += len(new)
            ids.update(new)
            missing = [r.content_hash for r in chunk if r.content_hash not in new]
            if missing:
                ids.update(conn.execute(select(runs.c.content_hash, runs.c.id)
                                        .where(runs.c.content_hash.in_(missing))).tuples().all())
            for r in chunk:  # stored before the gate refused it: refused now, never a baseline again
                if r.content_hash not in new and r.run["status"] == "refused":
                    conn.execute(runs.update().where(runs.c.content_hash == r.content_hash).values(
                        {k: r.run[k] for k in ("status", "error", "baseline_ok", "baseline_reason")}))
        if names:
            rows = [{"run_id": run_id, "tag": name, "added_at": stamp} for run_id in ids.values() for name in names]
            for chunk in _chunks(rows):
                conn.execute(insert(tags).on_conflict_do_nothing(index_elements=["run_id", "tag"]), chunk)
    return Added(added, len(unique) - added, [ids[r.content_hash] for r in records])


def add_paths(db: Database, paths: Iterable[Path], tag_names: Iterable[str] = ()) -> tuple[Added, list[str]]:
    """Read ``paths`` (:func:`collect`) and add what was valid; returns the counts and the refusals (a result that
    cannot be true is stored as refused, and named)."""
    collected = collect(paths)
    stored = [one_line(f"{r.run['source']}: stored as refused, never a baseline: {r.run['error']}", 600)
              for r in collected.records if r.run["status"] == "refused"]
    return add_records(db, collected.records, tag_names), collected.refused + stored


def tag_runs(db: Database, run_ids: Iterable[int], tag_names: Iterable[str]) -> int:
    """Tag existing runs; returns how many (run, tag) pairs are new."""
    stamp = now_iso()
    rows = [{"run_id": run_id, "tag": tag_name(name), "added_at": stamp} for run_id in run_ids for name in tag_names]
    with db.write() as conn:
        result = conn.execute(_insert(db)(tags).on_conflict_do_nothing(index_elements=["run_id", "tag"]), rows)
    return max(result.rowcount, 0) if rows else 0
