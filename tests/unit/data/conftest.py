"""Fixtures of the data-pipeline tests: a tiny verified sample build, and private copies of it.

The build runs every stage in-process (tests/helpers/data.py ``run_all_stages``) once per test module,
as it did when each module imported the fixture; a test that changes data works on ``data_copy``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.data import copy_tree, run_all_stages, use_data_env


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified tiny sample build (both models), made once per test module; copy it before changing it."""
    data_dir = tmp_path_factory.mktemp("data-sample")
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_data_env(monkeypatch, data_dir)
        run_all_stages()
    return data_dir


@pytest.fixture
def data_copy(built_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the module's sample build, with the config pointed at it: free to change."""
    data_dir = copy_tree(built_sample, tmp_path / "data")
    use_data_env(monkeypatch, data_dir)
    return data_dir
