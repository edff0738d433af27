"""Adding results: idempotent, atomic, strict on every file, safe on archives, and correct with two writers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from evaluate.history import store
from evaluate.history.ingest import add_records, collect
from evaluate.history.store import open_database
from evaluate.history.target import HistoryError
from tests.helpers.evaluate import make_result
from tests.helpers.history import BACKENDS, REPO, cli, database, history, results

Capture = pytest.CaptureFixture[str]


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with database(request.param, tmp_path) as value:
        yield value


def _count(db: str, table=store.runs) -> int:  # type: ignore[no-untyped-def]
    with open_database(db) as opened, opened.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_adding_twice_stores_each_result_once(db: str, tmp_path: Path, capsys: Capture) -> None:
    folder = tmp_path / "out"
    results(folder, 3)
    first = cli(capsys, "add", "--db", db, str(folder))
    assert first.returncode == 0 and "3 run(s) added, 0 already" in first.stdout, first.stderr
    again = cli(capsys, "add", "--db", db, str(folder), *map(str, sorted(folder.glob("train_*.json"))))
    assert again.returncode == 0 and "0 run(s) added, 3 already" in again.stdout
    assert _count(db) == 3 and _count(db, store.series) == 3


def test_an_add_is_one_transaction(db: str, tmp_path: Path) -> None:
    """A failure part-way (here: an invalid series row of the last record) stores nothing of the batch."""
    records = collect(results(tmp_path / "out", 3)).records
    broken = records[-1]
    records[-1] = type(broken)(broken.run, {**broken.series, "first_step": None})
    with open_database(db, create=True) as opened, pytest.raises(HistoryError):
        add_records(opened, records)
    assert _count(db) == 0 and _count(db, store.series) == 0


def _forged(folder: Path, name: str, change) -> Path:  # type: ignore[no-untyped-def]
    path = make_result(folder, "nvd", "mega", "llama", run_index=9)
    data = json.loads(path.read_text())
    change(data)
    forged = folder / name
    forged.write_text(json.dumps(data))
    path.unlink()
    return forged


def test_a_forged_result_is_refused_in_one_line_and_the_rest_added(db: str, tmp_path: Path, capsys: Capture) -> None:
    folder = tmp_path / "out"
    good = results(folder, 2)
    _forged(folder, "train_nvd_mega_llama_r7.json",
            lambda d: d["performance_metrics"].update(tokens_per_second_per_gpu="12345"))  # a number as a string
    _forged(folder, "train_nvd_mega_llama_r8.json", lambda d: d.update(platform="../../etc"))
    (folder / "train_nvd_mega_llama_r6.json").write_text('{"schema_version": 2, "status": "ok"')  # truncated
    proc = cli(capsys, "add", "--db", db, str(folder))
    assert proc.returncode == 1
    refused = proc.stderr.strip().splitlines()
    assert len(refused) == 3 and all(line.startswith("history: refused ") for line in refused), proc.stderr
    assert any("tokens_per_second_per_gpu" in line for line in refused)
    assert any("is not a platform tprimat knows" in line for line in refused)
    assert "2 run(s) added, 0 already" in proc.stdout and "3 input(s) refused" in proc.stdout
    assert _count(db) == len(good)


def test_failed_and_non_finite_runs_are_stored_but_never_a_baseline(db: str, tmp_path: Path, capsys: Capture) -> None:
    folder = tmp_path / "out"
    make_result(folder, "nvd", "mega", "llama", run_index=1, status="failed")
    nan = _forged(folder, "train_nvd_mega_llama_r2.json", lambda d: d["loss_values"].__setitem__(-1, None))
    assert cli(capsys, "add", "--db", db, str(folder)).returncode == 0
    with open_database(db) as opened, opened.read() as conn:
        rows = conn.execute(select(store.runs.c.id, store.runs.c.status, store.runs.c.baseline_ok,
                                   store.runs.c.baseline_reason).order_by(store.runs.c.id)).all()
    assert sorted((r.status, r.baseline_ok) for r in rows) == [("failed", False), ("ok", False)]
    assert any("loss not finite" in r.baseline_reason for r in rows)
    for selector in (str(rows[0].id), str(rows[1].id), f"{rows[0].id},{rows[1].id}"):
        gate = cli(capsys, "--db", db, "--candidate", str(nan), "--baseline", selector, module="evaluate.gate")
        assert gate.returncode == 2 and "never a baseline" in gate.stderr, gate.stderr
    gate = cli(capsys, "--db", db, "--candidate", str(nan), module="evaluate.gate")
    assert gate.returncode == 2 and "no ok run of" in gate.stderr


def _zip_with(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            archive.writestr(info, target)
    return path


def test_an_output_zip_is_read_safely(tmp_path: Path, capsys: Capture) -> None:
    folder = tmp_path / "out"
    good = results(folder, 2)
    forged = _forged(tmp_path / "forged", "train_nvd_mega_llama_r5.json", lambda d: d.update(status="finished"))
    archive = _zip_with(tmp_path / "output.zip", {
        "output/" + good[0].name: good[0].read_bytes(),
        "output/sub/" + good[1].name: good[1].read_bytes(),
        "../escape/train_nvd_mega_llama_r3.json": good[0].read_bytes(),
        "output/" + forged.name: forged.read_bytes(),
        "output/train_amd_mega_llama_r4.json": b" " * (20 * 2**20),  # 20 MiB of spaces: a zip bomb's ratio
        "output/notes.txt": b"not a result",
    }, links={"output/train_nvd_mega_llama_r6.json": "/etc/passwd"})
    db = str(tmp_path / "history.sqlite")
    proc = cli(capsys, "add", "--db", db, str(archive))
    assert proc.returncode == 1
    refused = proc.stderr.strip().splitlines()
    assert len(refused) == 4, proc.stderr
    assert any("'..' member name" in line for line in refused)
    assert any("symbolic link" in line for line in refused)
    assert any("compressed" in line and ":1" in line for line in refused)
    assert any(f"output.zip:output/{forged.name}" in line and "status" in line for line in refused)
    assert "2 run(s) added" in proc.stdout
    assert not (tmp_path / "escape").exists() and not (REPO / "escape").exists()
    assert _count(db) == 2


def test_a_file_that_is_no_zip_or_result_is_refused(tmp_path: Path, capsys: Capture) -> None:
    fifo = tmp_path / "train_nvd_mega_llama.json"
    os.mkfifo(fifo)
    proc = cli(capsys, "add", "--db", str(tmp_path / "h.sqlite"), str(fifo), str(tmp_path / "missing.json"))
    assert proc.returncode == 1 and "a FIFO" in proc.stderr and "no such file" in proc.stderr


_WRITER = """
import sys
from pathlib import Path
from evaluate.history.store import open_database
from evaluate.history.ingest import add_paths
with open_database(sys.argv[1], create=True, lock_timeout=60) as db:
    add_paths(db, [Path(p) for p in sys.argv[2:]])
"""


def test_two_writers_at_once_lose_and_duplicate_nothing(db: str, tmp_path: Path) -> None:
    """Two processes add overlapping sets to one (new) database at the same moment: every result once."""
    files = results(tmp_path / "out", 8)
    halves = (files[:5], files[3:])
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, db, *map(str, half)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for half in halves]
    outcomes = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outcomes
    with open_database(db) as opened, opened.read() as conn:
        hashes = conn.execute(select(store.runs.c.content_hash)).scalars().all()
        series_ids = conn.execute(select(store.series.c.run_id)).scalars().all()
    assert len(hashes) == len(set(hashes)) == 8
    assert len(series_ids) == 8


def test_hostile_strings_are_stored_on_both_databases(db: str, tmp_path: Path, capsys: Capture) -> None:
    """A NUL and a lone surrogate (valid JSON, refused by PostgreSQL's text as they are) are stored escaped."""
    path = _forged(tmp_path / "out", "train_nvd_mega_llama_r2.json", lambda d: d["gpu_info"].update(
        device_name="H100\u0000<script>\ud800"))
    text = path.read_text().replace("\\\\u0000", "\\u0000")
    path.write_text(text)
    proc = cli(capsys, "add", "--db", db, str(path))
    assert proc.returncode == 0, proc.stderr
    with open_database(db) as opened, opened.read() as conn:
        stored = conn.execute(select(store.runs.c.device_name, store.series.c.details)
                              .join(store.series, store.series.c.run_id == store.runs.c.id)).one()
    assert stored.device_name == "H100\\x00<script>\\ud800"
    assert "H100\\u0000<script>\\ud800" in stored.details
    listed = cli(capsys, "list", "--db", db)
    assert listed.returncode == 0 and "\x00" not in listed.stdout
    shown = history("diff", "--db", db, "1", "1")  # a real process: its stdout is UTF-8
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr


def test_an_mlperf_verdict_in_an_archive_is_re_checked_against_its_mllog_member(tmp_path: Path) -> None:
    from tests.helpers.mlperf import FULL, mlperf_result
    from utils.result.file import result_path
    from utils.result.mllog import mllog_path, mlperf_record

    path = result_path(tmp_path / "out", "nvd", "nemo", "llama", None, "mlperf")
    mlperf_result(tmp_path / "out", [4.1, 3.29], "nvd", "nemo",
                  mutate=lambda r: setattr(r, "mlperf", mlperf_record(r, mllog_path(path))), **FULL)
    with zipfile.ZipFile(tmp_path / "with.zip", "w") as archive:
        archive.write(path, f"output/{path.name}")
        archive.write(mllog_path(path), f"output/{mllog_path(path).name}")
    with zipfile.ZipFile(tmp_path / "without.zip", "w") as archive:
        archive.write(path, f"output/{path.name}")
    assert [r.run["status"] for r in collect([tmp_path / "with.zip"]).records] == ["ok"]
    alone = collect([tmp_path / "without.zip"]).records
    assert [r.run["status"] for r in alone] == ["refused"] and "cannot be re-checked" in alone[0].run["error"]
