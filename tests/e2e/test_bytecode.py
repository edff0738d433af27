"""The checkout's Pythons keep the bytecode they compile, even where PYTHONDONTWRITEBYTECODE is set.

shell/setup.sh installs .venv with uv, which writes no bytecode; with the variable set (as this machine's
and CI's environments have it), every interpreter compiled megatron-core, transformers and torch's modules
again: 21 s for megatron-core's import instead of 9 (docs/PERFORMANCE.md, "The quick benchmark"). shell/platform.sh
unsets it for the checkout's own .venv only; an image's python3 keeps the caller's choice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO

ASK = 'source "$ROOT/shell/platform.sh"; "$TPRIMAT_PYTHON" -c "import sys; print(sys.flags.dont_write_bytecode)"'


def _tree(tmp_path: Path, *, venv: bool) -> Path:
    """A folder with the two scripts platform.sh needs, and a .venv whose python is this one when asked."""
    root = tmp_path / "checkout"
    (root / "shell").mkdir(parents=True)
    for name in ("platform.sh", "sourced_only.sh"):
        shutil.copy2(REPO / "shell" / name, root / "shell" / name)
    if venv:
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return root


def _dont_write_bytecode(root: Path, tmp_path: Path) -> str:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "ROOT": str(root),
           "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(["bash", "-c", ASK], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_checkouts_venv_writes_bytecode_though_the_caller_said_not_to(tmp_path: Path) -> None:
    assert _dont_write_bytecode(_tree(tmp_path, venv=True), tmp_path) == "0"


def test_another_python_keeps_the_callers_choice(tmp_path: Path) -> None:
    """No .venv (an image): platform.sh takes python3 from PATH and leaves PYTHONDONTWRITEBYTECODE as it was."""
    assert _dont_write_bytecode(_tree(tmp_path, venv=False), tmp_path) == "1"


def test_the_suite_writes_bytecode() -> None:
    """tests/conftest.py unsets the variable for pytest, its workers and every process the tests start."""
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert not sys.dont_write_bytecode
