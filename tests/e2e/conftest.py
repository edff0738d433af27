"""Fixtures of the end-to-end tests: a throwaway copy of the repository for the scripts that write.

A script under test runs in the copy (tests/helpers/shell.py ``copy_repo``), never in the checkout, so
it cannot touch the real output/ or data_cache/. A module that needs more in its copy (stand-in job
scripts, generated files) extends ``repo`` by requesting it under the same name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.shell import copy_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh copy for each test."""
    return copy_repo(tmp_path / "repo")


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy for all the tests of a module (about 0.3 s a copy), for tests that leave it as they found it."""
    return copy_repo(tmp_path_factory.mktemp("shared") / "repo")
