"""Fixtures of the data-pipeline tests: a tiny verified sample build, and private copies of it.

The build runs every stage in-process (tests/helpers/data.py ``run_all_stages``, about 10 s of CPU) once per test
session, shared by the pytest-xdist workers (tests/helpers/session_build.py); each test module gets its own copy of
it (``built_sample``), and a test that changes data works on a copy of that (``data_copy``). A copy reads as the
build does: the manifests record paths relative to DATA_DIR, and the hash caches beside the data key each file by
its inode and change time, so a copy's files are hashed once more, as ``data_copy``'s always were.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.data import copy_tree, run_all_stages, use_data_env
from tests.helpers.session_build import built_once


def _build(data_dir: Path, _scratch: Path) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_data_env(monkeypatch, data_dir)
        run_all_stages()


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The verified tiny sample build (every model), made once per session: never changed, only copied."""
    return built_once(tmp_path_factory, "data-sample", _build)


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
