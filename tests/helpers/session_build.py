"""A folder built once per pytest session and shared by every pytest-xdist worker of it, never changed: copy it.

Why: the suite runs three xdist workers (shell/test.sh), and a fixture of session scope runs once per worker. The
sample builds (tests/conftest.py ``sample_data_dir``: ``shell/data.sh``, about 30 s of CPU; tests/unit/data/
conftest.py ``sample_build``: every data stage in-process, about 10 s) are the same in each, so the first worker to
need one builds it into the session's common temporary folder (every worker's basetemp's parent) under a lock the
others wait on, and each caller works on a copy.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path, Path], None]) -> Path:
    """The folder ``build(folder, scratch)`` filled, once for this session: ``scratch`` is a folder of its own for
    what the build writes beside its product. Under xdist the first worker builds it, the others wait; a build that
    failed (raised) is made again by the next caller."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        built = factory.mktemp(name)
        build(built, factory.mktemp(f"{name}-scratch"))
        return built
    shared = factory.getbasetemp().parent / f"shared-{name}"
    shared.mkdir(exist_ok=True)
    built = shared / "data"
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "complete").is_file():
            shutil.rmtree(built, ignore_errors=True)
            shutil.rmtree(shared / "scratch", ignore_errors=True)
            build(built, shared / "scratch")
            (shared / "complete").touch()
    return built
