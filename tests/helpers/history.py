"""Shared helpers of the history tests (tests/unit/evaluate/history/): databases to test against and results to add.

Every database test runs against SQLite, and against a real PostgreSQL server when
``TPRIMAT_TEST_POSTGRES_URL`` names one (``shell/postgres_throwaway.sh`` starts one; ``.ci/run`` always does):
each test then gets a database of its own, created and dropped on that server. Under CI (``CI=true``) a missing
server is a failure, not a skip.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.helpers.evaluate import make_result
from tests.helpers.paths import REPO
from tests.helpers.proc import main_in_process

POSTGRES_ENV = "TPRIMAT_TEST_POSTGRES_URL"
BACKENDS = ("sqlite", "postgresql")


def postgres_admin_url() -> str | None:
    url = os.environ.get(POSTGRES_ENV, "").strip()
    if not url:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{POSTGRES_ENV} is not set under CI: .ci/run starts a throwaway PostgreSQL server")
        pytest.skip(f"{POSTGRES_ENV} not set: no PostgreSQL server to test against (shell/postgres_throwaway.sh)")
    return url


@contextlib.contextmanager
def fresh_postgres() -> Iterator[str]:
    """A new, empty database on the test server, dropped afterwards; yields its URL."""
    admin = postgres_admin_url()
    name = f"tprimat_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@contextlib.contextmanager
def database(backend: str, tmp_path: Path) -> Iterator[str]:
    """The ``--db`` value of an empty database of ``backend`` (a file path, or a server database URL)."""
    if backend == "sqlite":
        yield str(tmp_path / "history.sqlite")
    else:
        with fresh_postgres() as url:
            yield url


def history(*args: str, env: dict[str, str] | None = None, module: str = "evaluate.history",
            timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m evaluate.history ARGS`` (or another module) as a user runs it."""
    run_env = {k: v for k, v in os.environ.items() if k != "HISTORY_DB"}
    run_env.update(env or {})
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=run_env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def cli(capsys: pytest.CaptureFixture[str], *args: str, module: str = "evaluate.history"
        ) -> subprocess.CompletedProcess:
    """The same command in this process (much faster than a new interpreter): exit code, stdout, stderr."""
    from evaluate.gate import main as gate_main
    from evaluate.history.cli import main as history_main

    return main_in_process(history_main if module == "evaluate.history" else gate_main, capsys, *args)


def results(folder: Path, count: int, platform: str = "nvd", framework: str = "mega", model: str = "llama",
            **kwargs) -> list[Path]:  # type: ignore[no-untyped-def]
    """``count`` repeat runs of one job (``_r1`` ...), each with its own step-time noise."""
    return [make_result(folder, platform, framework, model, run_index=k + 1, seed=k, **kwargs) for k in range(count)]
