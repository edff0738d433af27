"""The history database itself: versioned schema and migration, and every bad database refused in one line.

Each refusal is exit 2 with one line and leaves the file as it was (nothing half-written).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, insert, inspect, select, text

from evaluate.history import store
from evaluate.history.ingest import add_paths, collect
from evaluate.history.store import open_database
from evaluate.history.target import HistoryError, resolve_target, scrub
from tests.helpers.history import BACKENDS, cli, database, history, results
from utils.config.load import load_config
from utils.config.rules import ConfigError

Capture = pytest.CaptureFixture[str]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database(request.param, tmp_path) as value:
        yield value


def _one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_new_database_is_created_at_version_1_and_migrated(db: str) -> None:
    with open_database(db, create=True) as opened, opened.read() as conn:
        values = dict(conn.execute(select(store.meta.c.key, store.meta.c.value)).all())
        assert values["application"] == "tprimat-history"
        assert values["schema_version"] == str(store.SCHEMA_VERSION)
        assert {"runs", "series", "tags", "tprimat_meta"} <= set(conn.dialect.get_table_names(conn))


def test_a_version_1_database_is_migrated_and_keeps_its_runs(db: str, tmp_path: Path, capsys: Capture) -> None:
    """A database as version 1 wrote it (no tags table, no workload-device index) opens at the current version."""
    record = collect(results(tmp_path / "out", 1)).records[0]
    target = resolve_target(db)
    assert target is not None
    url = f"sqlite:///{target.path}" if target.sqlite else target.url
    engine = create_engine(url)
    with engine.begin() as conn:
        store._create_v1(conn)
        run_id = conn.execute(insert(store.runs).values(**record.run, added_at="2025-01-01T00:00:00+00:00")
                              .returning(store.runs.c.id)).scalar_one()
        conn.execute(insert(store.series).values(**record.series, run_id=run_id))
    with engine.connect() as conn:
        assert "tags" not in conn.dialect.get_table_names(conn)
    engine.dispose()
    proc = cli(capsys, "migrate", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert f"schema version {store.SCHEMA_VERSION}, 1 run(s)" in proc.stdout
    proc = cli(capsys, "tag", "--db", db, str(run_id), "accepted")
    assert proc.returncode == 0, proc.stderr
    with open_database(db) as opened, opened.read() as conn:
        assert conn.execute(select(store.tags.c.tag)).scalars().all() == ["accepted"]
        assert conn.execute(select(store.runs.c.content_hash)).scalars().all() == [record.content_hash]
        assert "ix_runs_trend" in {index["name"] for index in inspect(conn).get_indexes("runs")}  # version 3


def test_a_newer_schema_is_refused_and_left_alone(db: str, tmp_path: Path, capsys: Capture) -> None:
    open_database(db, create=True).close()
    with open_database(db) as opened, opened.write() as conn:
        conn.execute(store.meta.update().where(store.meta.c.key == "schema_version").values(value="99"))
    proc = cli(capsys, "add", "--db", db, *map(str, results(tmp_path / "out", 1)))
    line = _one_line_exit_2(proc)
    assert f"schema version 99 is newer than this tprimat knows ({store.SCHEMA_VERSION})" in line
    with pytest.raises(HistoryError, match="newer"):
        open_database(db)


def test_a_database_of_something_else_is_refused(db: str, tmp_path: Path, capsys: Capture) -> None:
    target = resolve_target(db)
    assert target is not None
    engine = create_engine(f"sqlite:///{target.path}" if target.sqlite else target.url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)"))
    engine.dispose()
    before = target.path.read_bytes() if target.sqlite else None
    line = _one_line_exit_2(cli(capsys, "add", "--db", db, *map(str, results(tmp_path / "out", 1))))
    assert "not a tprimat history database (it holds other tables: invoices)" in line
    if before is not None:
        assert target.path.read_bytes() == before


@pytest.mark.parametrize("content", [b"{\"not\": \"a database\"}\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4096])
def test_a_file_that_is_no_sqlite_database_is_refused(tmp_path: Path, content: bytes, capsys: Capture) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(content)
    line = _one_line_exit_2(cli(capsys, "add", "--db", str(path), *map(str, results(tmp_path / "out", 1))))
    assert "not a SQLite database" in line or "malformed" in line
    assert path.read_bytes() == content


def test_a_missing_database_is_not_created_by_a_query(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "none.sqlite"
    for command in (["list"], ["trend", "--png", "none"], ["diff", "1", "2"]):
        line = _one_line_exit_2(history(*command, "--db", str(path)))
        assert "no such file" in line
    assert not path.exists()


def test_a_locked_database_is_refused_after_the_timeout_and_nothing_is_written(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "history.sqlite"
    open_database(str(path), create=True).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    try:
        line = _one_line_exit_2(cli(capsys, "add", "--db", str(path), "--lock-timeout", "0.3",
                                        *map(str, results(tmp_path / "out", 2))))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked by another process (waited 0.3 s); nothing was written" in line
    with open_database(str(path)) as opened, opened.read() as conn:
        assert conn.execute(select(store.runs.c.id)).all() == []


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` unwritable even for root (the immutable attribute), else by its mode bits."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a filesystem without the immutable attribute: cannot make it read-only")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        path.chmod(0o444)
        path.parent.chmod(0o555)
        try:
            yield
        finally:
            path.parent.chmod(0o755)
            path.chmod(0o644)


def test_a_read_only_database_is_readable_and_refuses_a_write_in_one_line(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "history.sqlite"
    assert cli(capsys, "add", "--db", str(path), *map(str, results(tmp_path / "out", 1))).returncode == 0
    before = path.read_bytes()
    more = results(tmp_path / "more", 2, step_time=1.7)
    with _read_only(path):
        listed = cli(capsys, "list", "--db", str(path))
        assert listed.returncode == 0 and "1 run(s)" in listed.stdout, listed.stderr
        line = _one_line_exit_2(cli(capsys, "add", "--db", str(path), *map(str, more)))
        assert "read-only" in line and "nothing was written" in line
    assert path.read_bytes() == before


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("url", [
    "postgresql://tprimat:S3cr3t-pw%21@127.0.0.1:{port}/history",
    "postgresql://tprimat:S3cr3t-pw%21@[::1:{port}/history",  # not even a URL: still masked
])
def test_an_unreachable_server_is_one_line_without_the_password(tmp_path: Path, url: str, capsys: Capture) -> None:
    value = url.format(port=_closed_port())
    for command in (["add", *map(str, results(tmp_path / "out", 1))], ["list"], ["trend", "--png", "none"]):
        proc = history(command[0], "--db", value, *command[1:])
        line = _one_line_exit_2(proc)
        assert "S3cr3t" not in proc.stdout + proc.stderr
        assert "***" in line or "not a database URL" in line
    gate = history("--db", value, "--candidate", str(tmp_path / "out"), module="evaluate.gate")
    assert gate.returncode == 2 and "S3cr3t" not in gate.stdout + gate.stderr


def test_scrub_removes_the_password_wherever_an_error_quotes_it() -> None:
    """Not only a URL's userinfo: a driver's message may quote the password bare, URL-quoted or in a DSN."""
    target = resolve_target("postgresql://tprimat:p%40ss%2Fw0rd%20x@db.example/history")
    assert target is not None and target.password == "p@ss/w0rd x"
    for said in ("FATAL: password 'p@ss/w0rd x' rejected", "dsn: password=p%40ss%2Fw0rd%20x host=db",
                 "url: postgresql://u@db/h?password=p%40ss%2Fw0rd+x"):
        shown = scrub(said, target)
        assert "w0rd" not in shown and "***" in shown, shown


def test_the_password_comes_from_the_secret_and_is_never_shown(tmp_path: Path) -> None:
    url = f"postgresql://tprimat@127.0.0.1:{_closed_port()}/history"
    proc = history("list", "--db", url, env={"HISTORY_DB_PASSWORD": "Fr0m-the-secret"})
    _one_line_exit_2(proc)
    assert "Fr0m-the-secret" not in proc.stdout + proc.stderr
    target = resolve_target(url, {"HISTORY_DB_PASSWORD": "Fr0m-the-secret"})
    assert target is not None and target.password == "Fr0m-the-secret" and "Fr0m" not in target.shown


def test_config_refuses_a_password_in_history_db_without_showing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(environ={"HISTORY_DB": "postgresql://u:Never-Sh0wn@db.example/tprimat"})
    assert "Never-Sh0wn" not in str(caught.value) and "HISTORY_DB holds a password" in str(caught.value)
    assert load_config(environ={"HISTORY_DB": "postgresql://u@db.example/tprimat"}).history_db


def test_off_turns_the_history_off(tmp_path: Path, capsys: Capture) -> None:
    proc = cli(capsys, "add", "--db", "off", *map(str, results(tmp_path / "out", 1)))
    assert proc.returncode == 0 and "HISTORY_DB=off; nothing added" in proc.stdout
    assert resolve_target("OFF") is None
    with pytest.raises(HistoryError, match="off"):
        open_database("off")


def test_adding_to_a_fresh_database_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "history.sqlite"
    with open_database(str(path), create=True) as opened:
        added, refused = add_paths(opened, [tmp_path / "none"])
    assert added.added == 0 and refused and path.is_file()
