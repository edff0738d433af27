"""The history database: its schema and versions, and opening it safely (where it is: ``target.py``).

SQLAlchemy Core: a run is a few flat rows, and Core's statements run unchanged on SQLite and PostgreSQL. A new
database is created at version 1 and migrated step by step like any old one (:data:`MIGRATIONS`). Refused in one
line, nothing written: another application's tables, a newer schema, a lock past ``lock_timeout``, a read-only file
for a write, an unreachable server. SQLite: this module opens every transaction (``BEGIN IMMEDIATE`` to write), so
writers queue; PostgreSQL: creation and migration hold an advisory lock.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from urllib.parse import quote

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    inspect,
    select,
)
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from evaluate.history.target import HistoryError, Target, resolve_target, scrub
from utils.files.generated import HISTORY_APPLICATION
from utils.io.sanitise import one_line

APPLICATION = HISTORY_APPLICATION
SCHEMA_VERSION = 3
# An arbitrary constant: the key of the PostgreSQL advisory lock held while a database is created or migrated.
_ADVISORY_KEY = 7_341_202_636


metadata = MetaData()

meta = Table(
    "tprimat_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# One row per added result. Strings are Text (no length a foreign file could exceed on PostgreSQL).
runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("content_hash", String(64), nullable=False, unique=True),
    Column("added_at", Text, nullable=False),
    Column("source", Text),
    Column("status", Text, nullable=False),
    Column("error", Text),
    Column("platform", Text, nullable=False),
    Column("framework", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("model_label", Text, nullable=False),
    Column("profile", Text, nullable=False),
    Column("run_index", Integer),
    Column("started_at", Text),
    Column("finished_at", Text),
    Column("run_time", Text, nullable=False, index=True),
    Column("workload_key", String(64), nullable=False, index=True),
    Column("device_name", Text),
    Column("device_count", Integer),
    Column("software_stack", Text),
    Column("software_version", Text),
    Column("driver_version", Text),
    Column("pytorch_version", Text),
    Column("cpu_name", Text),
    Column("hostname", Text),
    Column("image_tag", Text),
    Column("image_digest", Text),
    Column("samples_digest", Text),
    Column("code_commit", Text),
    Column("tokens_per_second", Float),
    Column("tokens_per_second_per_gpu", Float),
    Column("median_step_time", Float),
    Column("mfu", Float),
    Column("mfu_full", Float),
    Column("tflops_per_gpu", Float),
    Column("tokens_per_kwh", Float),
    Column("energy_j", Float),
    Column("peak_memory_gb", Float),
    Column("measured_steps", Integer),
    Column("baseline_ok", Boolean, nullable=False),
    Column("baseline_reason", Text),
    Column("versions", Text, nullable=False),  # JSON: the versions a trend marks when they change
)

# The bulky part of a run, apart so that ``runs`` stays small to scan (a trend reads 100,000 rows): the per-step
# arrays (JSON lists, None where not finite) for the gate, and the flat facts (JSON) a diff compares.
series = Table(
    "series", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("first_step", Integer, nullable=False),
    Column("step_interval", Integer, nullable=False),
    Column("skipped_steps", Integer, nullable=False),
    Column("step_times", Text, nullable=False),
    Column("losses", Text, nullable=False),
    Column("details", Text, nullable=False),
)

# Version 2: tags (a CI's "nightly", "release-25.11") to select baselines by name, and the index the
# gate's "last ok run of this workload on this device" walks.
tags = Table(
    "tags", metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("tag", String(200), primary_key=True),
    Column("added_at", Text, nullable=False),
)
WORKLOAD_DEVICE_INDEX = Index("ix_runs_workload_device_time", runs.c.workload_key, runs.c.device_name,
                              runs.c.run_time)
runs.indexes.discard(WORKLOAD_DEVICE_INDEX)  # created by the migration to version 2, never by version 1
# Version 3: the index ``history trend`` reads in series and time order, holding every column it shows (no sort).
# SQLite's covers the versions text too; PostgreSQL's cannot (a B-tree entry is limited to about 2.7 kB).
TREND_KEY = (runs.c.platform, runs.c.framework, runs.c.model_label, runs.c.profile, runs.c.device_name)
_TREND_COLUMNS = (*TREND_KEY, runs.c.run_time, runs.c.id, runs.c.status, runs.c.tokens_per_second_per_gpu, runs.c.mfu,
                  runs.c.tokens_per_kwh, runs.c.model)  # model: the page asks for its jobs' trends by model key
TREND_INDEXES = {"sqlite": Index("ix_runs_trend", *_TREND_COLUMNS, runs.c.versions),
                 "other": Index("ix_runs_trend", *_TREND_COLUMNS)}
for _index in TREND_INDEXES.values():
    runs.indexes.discard(_index)  # created by the migration to version 3 only
TABLES = ("tprimat_meta", "runs", "series", "tags")


def _create_v1(conn: Connection) -> None:
    """Version 1 as first released: meta, runs and series (no tags, no workload-device index)."""
    metadata.create_all(conn, tables=[meta, runs, series])
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    conn.execute(meta.insert(), [{"key": "application", "value": APPLICATION}, {"key": "schema_version", "value": "1"},
                                 {"key": "created_at", "value": created}])


def _migrate_1_to_2(conn: Connection) -> None:
    metadata.create_all(conn, tables=[tags])
    WORKLOAD_DEVICE_INDEX.create(conn)


def _migrate_2_to_3(conn: Connection) -> None:
    TREND_INDEXES["sqlite" if conn.dialect.name == "sqlite" else "other"].create(conn)


MIGRATIONS = {1: _migrate_1_to_2, 2: _migrate_2_to_3}  # from version k to k + 1
assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def _reason(exc: BaseException, target: Target, lock_timeout: float) -> str:
    """The database's own first line of the problem, named in words a user acts on."""
    original = getattr(exc, "orig", None) or exc
    first = (str(original).strip().splitlines() or [type(original).__name__])[0]
    lowered = first.lower()
    if "database is locked" in lowered or "lock timeout" in lowered or "could not obtain lock" in lowered:
        return f"locked by another process (waited {lock_timeout:g} s); nothing was written"
    if "readonly database" in lowered or "read-only" in lowered:
        return "read-only (cannot write here); nothing was written"
    if "file is not a database" in lowered:
        return "not a SQLite database (not a tprimat history database)"
    if "unable to open database file" in lowered:
        return "cannot open the file (missing folder or no permission)"
    return scrub(first, target)


@contextlib.contextmanager
def translated(target: Target, lock_timeout: float = 0.0) -> Iterator[None]:
    """Turn any database error inside the block into one :class:`HistoryError` line (password scrubbed)."""
    try:
        yield
    except HistoryError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise HistoryError(f"history database {target.shown}: {_reason(exc, target, lock_timeout)}") from None


class Database:
    """An open, checked history database: :meth:`read` and :meth:`write` give one transaction each."""

    def __init__(self, target: Target, engine: Engine, lock_timeout: float):
        self.target = target
        self.engine = engine
        self.lock_timeout = lock_timeout

    @property
    def shown(self) -> str:
        return self.target.shown

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with translated(self.target, self.lock_timeout), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction that takes the write lock first (SQLite: BEGIN IMMEDIATE); all or nothing."""
        with translated(self.target, self.lock_timeout), \
                self.engine.connect().execution_options(tprimat_write=True) as conn, conn.begin():
            yield conn

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _engine(target: Target, lock_timeout: float, read_only: bool) -> Engine:
    if target.sqlite:
        assert target.path is not None
        url = URL.create("sqlite", database=f"file:{quote(str(target.path))}",
                         query={"mode": "ro" if read_only else "rwc", "uri": "true"})
        engine = create_engine(url, connect_args={"timeout": lock_timeout})

        @event.listens_for(engine, "connect")
        def _no_implicit_transactions(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            dbapi_connection.isolation_level = None  # this module opens every transaction itself
            dbapi_connection.execute("PRAGMA foreign_keys = ON")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            if not conn.get_execution_options().get("tprimat_write", False):
                conn.exec_driver_sql("BEGIN")
                return
            # The write lock is waited for in SQLite waits of 0.1 s, so a signal is answered between two.
            raw, deadline = conn.connection.dbapi_connection, time.monotonic() + lock_timeout
            raw.execute("PRAGMA busy_timeout = 100")
            try:
                while time.monotonic() < deadline:
                    try:
                        raw.execute("BEGIN IMMEDIATE")
                        return
                    except sqlite3.OperationalError as exc:
                        if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                            break
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the last try: its error is said as any other
            finally:
                raw.execute(f"PRAGMA busy_timeout = {int(lock_timeout * 1000)}")

        return engine
    engine = create_engine(target.url, connect_args={"connect_timeout": 10}, pool_pre_ping=False)
    milliseconds = max(1, int(lock_timeout * 1000))

    @event.listens_for(engine, "connect")
    def _timeouts(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {milliseconds}")
        dbapi_connection.commit()

    return engine


def _stored_version(conn: Connection, target: Target) -> int | None:
    """The schema version the database records; None when it is empty. Raises for a foreign or newer one."""
    names = set(inspect(conn).get_table_names())
    if "tprimat_meta" not in names:
        if names:
            listed = ", ".join(sorted(one_line(n, 40) for n in names)[:5])
            raise HistoryError(f"history database {target.shown}: not a tprimat history database "
                               f"(it holds other tables: {listed}); nothing was written")
        return None
    values = dict(conn.execute(select(meta.c.key, meta.c.value)).all())
    if values.get("application") != APPLICATION:
        raise HistoryError(f"history database {target.shown}: not a tprimat history database "
                           f"(application {one_line(values.get('application'), 60)!r}); nothing was written")
    try:
        version = int(values.get("schema_version", ""))
    except ValueError:
        raise HistoryError(f"history database {target.shown}: unreadable schema version "
                           f"{one_line(values.get('schema_version'), 40)!r}") from None
    if version > SCHEMA_VERSION:
        raise HistoryError(f"history database {target.shown}: schema version {version} is newer than this tprimat "
                           f"knows ({SCHEMA_VERSION}); update tprimat to use it (nothing was written)")
    if version < 1:
        raise HistoryError(f"history database {target.shown}: schema version {version} is not a tprimat version")
    return version


def _prepare(db: Database, create: bool) -> None:
    """Check the schema; create an empty database (``create``) and migrate an old one, in one transaction."""
    with db.read() as conn:
        version = _stored_version(conn, db.target)
    if version == SCHEMA_VERSION:
        return
    if version is None and not create:
        raise HistoryError(f"history database {db.shown}: empty (no results added yet)")
    with db.write() as conn:
        if not db.target.sqlite:
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_ADVISORY_KEY})")
        version = _stored_version(conn, db.target)  # again, under the lock: another writer may have done it
        if version is None:
            _create_v1(conn)
            version = 1
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
        conn.execute(meta.update().where(meta.c.key == "schema_version").values(value=str(version)))


def open_database(value: str | Target | None, *, create: bool = False, lock_timeout: float = 30.0,
                  environ: dict[str, str] | None = None) -> Database:
    """The checked database at ``value`` (see :func:`resolve_target`); ``create`` makes a missing one, else a
    missing SQLite file is an error and no file is made."""
    target = value if isinstance(value, Target) else resolve_target(value, environ)
    if target is None:
        raise HistoryError("the history database is off (HISTORY_DB=off)")
    read_only = False
    if target.sqlite:
        assert target.path is not None
        if target.path.is_dir():
            raise HistoryError(f"history database {target.shown}: a directory, not a database file")
        if not target.path.exists():
            if not create:
                raise HistoryError(f"history database {target.shown}: no such file (add results first: "
                                   "python -m evaluate.history add PATH)")
            with translated(target):
                target.path.parent.mkdir(parents=True, exist_ok=True)
        elif not create and not os.access(target.path, os.W_OK):
            read_only = True  # reading needs no lock file next to it; a migration would fail in one line
    try:
        engine = _engine(target, lock_timeout, read_only)
    except (NoSuchModuleError, ImportError, ArgumentError) as exc:
        raise HistoryError(f"history database {target.shown}: driver unavailable ({scrub(exc, target)})") from None
    db = Database(target, engine, lock_timeout)
    try:
        _prepare(db, create)
    except BaseException:
        db.close()
        raise
    return db


def safe_output() -> None:
    """A stored text may hold a lone surrogate (valid JSON, no UTF-8): printed escaped, never a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
