"""Fixtures of the data-pipeline tests: a tiny verified sample build, and private copies of it.

The build runs every stage in-process (tests/helpers/data.py ``run_all_stages``, about 10 s of CPU) once per test
session; each test module gets its own copy of it (``built_sample``), and a test that changes data works on a copy of
that (``data_copy``). Under pytest-xdist the workers share the one build as tests/conftest.py's ``sample_data_dir``
does: the first worker to need it builds it into the session's common temporary folder under a lock the others wait
on. A copy reads as the build does: the manifests record paths relative to DATA_DIR, and the hash caches beside the
data key each file by its inode and change time, so a copy's files are hashed once more, as ``data_copy``'s always were.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.data import copy_tree, run_all_stages, use_data_env


def _build(data_dir: Path) -> Path:
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_data_env(monkeypatch, data_dir)
        run_all_stages()
    return data_dir


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verified tiny sample build (every model), made once per session: never changed, only copied."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _build(tmp_path_factory.mktemp("data-sample-build"))
    shared = tmp_path_factory.getbasetemp().parent / "shared-data-sample"  # every worker's basetemp's parent
    shared.mkdir(exist_ok=True)
    built = shared / "data"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "complete").is_file():
            shutil.rmtree(built, ignore_errors=True)
            _build(built)
            (shared / "complete").touch()
    return built


@pytest.fixture(scope="module")
def built_sample(sample_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test module's own copy of the session's sample build; copy it again (``data_copy``) before changing it."""
    return copy_tree(sample_build, tmp_path_factory.mktemp("data-sample") / "data")


@pytest.fixture
def data_copy(built_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the module's sample build, with the config pointed at it: free to change."""
    data_dir = copy_tree(built_sample, tmp_path / "data")
    use_data_env(monkeypatch, data_dir)
    return data_dir
