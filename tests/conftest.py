"""Shared fixtures: a tiny offline workload and its data, prepared once per test session.

The sample data is built by the real pipeline (``shell/data.sh`` with
``DATASET=sample``), so every test that trains reads data and tokenizers through
the same loading code a real run uses.

Fixtures only: what a test imports (the workload, ``run_module``, ``free_port``, paths) lives in
the package ``tests/helpers/``; no test imports this file as a module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.hermetic import cache_environ
from tests.helpers.paths import REPO
from tests.helpers.session_build import built_once
from tests.helpers.suite_order import slowest_first
from tests.helpers.workload import tiny_environ

# Before any test module imports torch, matplotlib or huggingface_hub (some read these at import):
# caches go inside this checkout unless the caller (shell/test.sh, a developer) chose already.
for _name, _path in cache_environ(REPO).items():
    os.environ.setdefault(_name, _path)
# OpenMP threads that wait at a barrier sleep instead of spinning (libgomp, torch's CPU wheels). The launcher gives a
# cpu job as many threads as the machine has cores, while the other pytest worker and its jobs use those cores too:
# a spinning thread then burns the time slice its peer needs. A tiny tran job's step took 4.6-5.2 s with the default
# and 0.17-0.19 s with PASSIVE at load 12 on the 2-core VM (docs/PERFORMANCE.md, "The test suite"). Every job and
# tool the tests start inherits it; a caller's own value is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The suite's interpreters keep the bytecode they compile, in .venv and here (shell/platform.sh says why: uv installs
# .venv without it, and a probe that imports megatron-core took 21 s instead of 9). This process from here on, and
# every worker and process the tests start.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture(autouse=True)
def _host_memory_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cpu job is sized against this host's memory (utils/measure/memory.py): unknown in the tests that launch in
    process, so a stand-in 8B job passes on a 16 GiB laptop as on a 512 GiB server. The tests of that check set it."""
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the slowest test files first (``tests/helpers/suite_order.py`` says why); xdist keeps
    this order where ``--no-loadscope-reorder`` is given, as ``shell/test.sh`` gives it. Every worker orders its
    identical collection the same way, as xdist requires. A single-process run keeps pytest's own order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = [items[position] for position in slowest_first([item.nodeid for item in items])]


def _build_sample_data(data_dir: Path, output_dir: Path) -> None:
    proc = subprocess.run(
        ["bash", str(REPO / "shell" / "data.sh")],
        env=tiny_environ(data_dir, output_dir),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"shell/data.sh failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="session")
def sample_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Offline sample corpus, tokenizers and Megatron datasets for llama and qwen (built once).

    Under pytest-xdist the workers share one build (about 30 s of CPU each time): the first worker to need it runs
    ``shell/data.sh`` into the session's common temporary folder, under a lock the others wait on, and each worker
    then works on its own copy (2.4 MB), since jobs write their index caches and digests under DATA_DIR.
    """
    data_dir = tmp_path_factory.mktemp("sample-data")
    shutil.copytree(built_once(tmp_path_factory, "sample-data", _build_sample_data), data_dir, dirs_exist_ok=True)
    return data_dir


@pytest.fixture
def tiny_env(sample_data_dir: Path, tmp_path: Path) -> Callable[..., dict[str, str]]:
    """Factory: the tiny workload's environment with a fresh OUTPUT_DIR, plus overrides."""

    def make(**overrides: str) -> dict[str, str]:
        return tiny_environ(sample_data_dir, tmp_path / "output", **overrides)

    return make
