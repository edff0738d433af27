"""The shell side: ``shell/train.sh`` adds each job's result after the job; ``purge.sh --with-history``.

The launchers are stand-ins (as in tests/e2e/test_shell_train.py): each job leaves the incomplete result
train.sh writes before it starts, which is what gets added. The copy has no comparison (tests/helpers/shell.py
``without_comparison``): it runs after every add, and no test here reads it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import utils.files.purge as purge_module
from evaluate.history.store import open_database
from tests.helpers.proc import free_port
from tests.helpers.shell import clean_env, copy_repo, run_script, without_comparison
from utils.files.purge import main as purge_main

STAND_IN = """#!/usr/bin/env bash
exit 0
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = copy_repo(tmp_path / "repo")
    for script in (root / "train").glob("train_cpu_tran_*.sh"):
        script.write_text(STAND_IN)
    return without_comparison(root)


def _train(repo: Path, tmp_path: Path, history_db: str, models: str = "llama qwen") -> tuple[int, str, str]:
    env = clean_env(tmp_path, OUTPUT_DIR=str(tmp_path / "out"), MODEL_SIZE="tiny", MASTER_PORT=str(free_port()),
                    PLATFORM="cpu", FRAMEWORK="tran", MODELS=models, HISTORY_DB=history_db)
    proc = run_script(repo, "shell/train.sh", env=env, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_train_adds_every_result_after_its_job(repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    code, out, err = _train(repo, tmp_path, str(db))
    assert code == 1, "the stand-ins leave incomplete results"
    assert out.count("history: 1 run(s) added, 0 already in") == 2, out + err
    with open_database(str(db)) as opened, opened.read() as conn:
        rows = conn.exec_driver_sql("SELECT model, status, baseline_ok FROM runs ORDER BY id").all()
    assert [tuple(r) for r in rows] == [("llama", "incomplete", 0), ("qwen", "incomplete", 0)]


def test_an_unusable_database_never_fails_the_run(repo: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a database at all " * 64)
    code, out, err = _train(repo, tmp_path, str(garbage), models="llama")
    assert code == 1, "as without a database: the stand-in leaves an incomplete result"
    assert "0 of 1 job(s) finished ok" in out
    assert err.count("the result was not added to the history database") == 1, err
    assert "not a SQLite database" in err
    assert garbage.read_bytes() == b"not a database at all " * 64


def _purge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], history_db: str,
           *args: str) -> tuple[int, str, str]:
    """In-process purge against an empty stand-in checkout: the real one's caches are other workers' bytecode, and
    removing them under a parallel run made this purge fail (CI, stop 55)."""
    for key, value in {"OUTPUT_DIR": str(tmp_path / "out"), "DATA_DIR": str(tmp_path / "data"),
                       "HISTORY_DB": history_db}.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "checkout").mkdir(exist_ok=True)
    monkeypatch.setattr(purge_module, "REPO_ROOT", tmp_path / "checkout")
    code = purge_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_purge_removes_the_history_only_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "keep" / "history.sqlite"
    open_database(str(db), create=True).close()
    code, out, _ = _purge(monkeypatch, tmp_path, capsys, str(db), "--dry-run")
    assert code == 0 and str(db) not in out
    code, out, _ = _purge(monkeypatch, tmp_path, capsys, str(db), "--with-history", "--dry-run")
    assert code == 0 and f"would remove {db}" in out and db.exists()
    code, out, _ = _purge(monkeypatch, tmp_path, capsys, str(db), "--with-history")
    assert code == 0 and not db.exists()


def test_purge_refuses_what_is_not_a_tprimat_history(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "theirs.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    code, _, err = _purge(monkeypatch, tmp_path, capsys, str(other), "--with-history")
    assert code == 1 and "is not a tprimat history database; left alone" in err and other.exists()
    code, _, err = _purge(monkeypatch, tmp_path, capsys, "postgresql://u@db.example/tprimat", "--with-history")
    assert code == 1 and "never drops one" in err
