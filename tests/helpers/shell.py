"""Helpers for the shell-layer tests: a throwaway copy of the repository and a clean environment.

Scripts that write (purge, wrap, train.sh's loop) run in a copy, so no test can touch the real
checkout's output/ or data_cache/. The copy links the real .venv, so platform.sh finds Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.helpers.paths import FAKES, REPO
from tests.helpers.proc import free_port
from utils.config.model import Config

CONFIG_KEYS = {name.upper() for name in Config.__dataclass_fields__} | {"GBS"}
_IGNORED = shutil.ignore_patterns(
    ".venv", ".git", "output", "output.zip", "data_cache", "__pycache__", ".pytest_cache", ".ruff_cache", ".cache",
    ".side", ".whl", "history",
    "secrets.env", "*.egg-info",
)


def _code_files() -> list[str] | None:
    """The checkout's code as git sees it: tracked files and untracked ones git does not ignore."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name]


def copy_repo(dest: Path) -> Path:
    """Copy the checkout (code only) to ``dest`` and link the real virtualenv into it.

    Only what git tracks or would track is copied: ignored folders (a developer's conformance Pythons in
    ``.side/``, fetched trees, caches) can hold gigabytes, and every shell test copies the checkout.
    """
    names = _code_files()
    if names is None:  # not a git checkout: the ignore list instead
        shutil.copytree(REPO, dest, ignore=_IGNORED, symlinks=True)
    else:
        for name in names:
            if name == ".venv":
                continue  # a linked virtualenv (a git worktree's) is a file git lists: linked below like a folder
            source, target = REPO / name, dest / name
            if not source.exists() and not source.is_symlink():
                continue  # deleted in the working tree, not yet in the index
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    (dest / ".venv").symlink_to(REPO / ".venv")
    (dest / "output").mkdir(exist_ok=True)
    return dest


def without_comparison(root: Path) -> Path:
    """Remove ``evaluate/compare.py`` from a throwaway copy, so its ``shell/train.sh`` skips the comparison.

    train.sh runs ``evaluate.compare`` and ``evaluate.report_html`` after its jobs only where that file exists
    (about 7 CPU seconds for two interpreters that import the evaluate stack): a test that asserts nothing on the
    comparison, its page or its output lines drops it. train.sh says so in one line ("evaluate/compare.py is not
    present; skipping the comparison"), and exits as it would have (the comparison never changes its status).
    """
    (root / "evaluate" / "compare.py").unlink(missing_ok=True)
    return root


def clean_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """os.environ without tprimat keys, secrets or device hints; fake docker first on PATH."""
    drop_prefixes = ("TPRIMAT_", "NCCL_", "RCCL_", "HSA_", "HIP_", "NVTE_", "CUDA_", "ROCR_", "FAKE_DOCKER_")
    env = {
        k: v for k, v in os.environ.items()
        if k not in CONFIG_KEYS and k != "HF_TOKEN" and not k.startswith(drop_prefixes)
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        PATH=f"{FAKES}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        FAKE_DOCKER_DIR=str(tmp_path / "docker-calls"),
        TMPDIR=str(tmp_path),
        HISTORY_DB="off",  # the results database: a test that wants one names it (tests/unit/evaluate/history/)
        # Stand-in jobs of PLATFORM=amd|nvd run on this GPU-less host; a test of the refusal removes it.
        TPRIMAT_FORCE_PLATFORM="1",
    )
    env.update(overrides)
    return env


def script_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """:func:`clean_env` for a script of a throwaway copy, with every folder it reads or writes under ``tmp_path``.

    OUTPUT_DIR is ``out/``, DATA_DIR ``data/``, HF_HOME ``hf/`` and JOB_LOG ``jobs.log`` (where the stand-in
    job scripts record their calls); MODEL_SIZE is tiny (full shapes are refused on cpu before any job) and
    MASTER_PORT a free one (shell/train.sh waits for the config's 29500, which every checkout on the machine
    shares). ``values`` override any of them.
    """
    defaults = {"OUTPUT_DIR": str(tmp_path / "out"), "DATA_DIR": str(tmp_path / "data"),
                "HF_HOME": str(tmp_path / "hf"), "JOB_LOG": str(tmp_path / "jobs.log"), "MODEL_SIZE": "tiny",
                "MASTER_PORT": str(free_port())}
    return clean_env(tmp_path, **{**defaults, **values})


def run_script(root: Path, script: str, *args: str, env: dict[str, str], timeout: int = 120,
               stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / script), *args], env=env, cwd=root, capture_output=True, text=True,
        timeout=timeout, input=stdin if stdin is not None else "",
    )


def docker_calls(env: dict[str, str]) -> list[list[str]]:
    """Every recorded docker call's argv, in call order."""
    calls_dir = Path(env["FAKE_DOCKER_DIR"])
    if not calls_dir.is_dir():
        return []
    files = sorted(calls_dir.glob("call-*.args"), key=lambda p: int(p.stem.split("-")[1]))
    return [p.read_bytes().decode().split("\0")[:-1] for p in files]


def docker_env_files(env: dict[str, str], call_number: int) -> list[str]:
    """Contents of the --env-file files of one call (1-based), as copied when docker ran."""
    calls_dir = Path(env["FAKE_DOCKER_DIR"])
    files = sorted(calls_dir.glob(f"call-{call_number}.envfile-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return [p.read_text() for p in files]


def docker_env_file_modes(env: dict[str, str], call_number: int) -> list[str]:
    """Octal permission bits of the --env-file files of one call (1-based), as seen when docker ran."""
    calls_dir = Path(env["FAKE_DOCKER_DIR"])
    files = sorted(calls_dir.glob(f"call-{call_number}.envmode-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return [p.read_text().strip() for p in files]


def flag_values(argv: list[str], flag: str) -> list[str]:
    """Values of a repeated ``--flag value`` option in an argv."""
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == flag]
