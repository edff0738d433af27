"""Every entry point answers ``--help``: each ``python -m`` module and each shell script, found afresh.

Why: ``bench/monitor_overhead.py`` crashed on every machine and nothing in the suite ran it
(issue 20). The lists are not written down here: every module of the project's packages with
a ``if __name__ == "__main__":`` block or a ``__main__.py``, and every script in ``shell/`` and in
the packages (sourced libraries, marked ``# shellcheck shell=bash``, aside), so a new entry point
or a moved one is covered without touching this file. Each runs in its own process as a user
runs it, all of them at once on the machine's cores (python and torch start-up dominate), with
the clean environment and the recording ``docker`` stand-in of ``tests/helpers/shell.py``:
``--help`` exits 0, prints a usage line, raises nothing, starts no container and writes nothing in
the (empty, temporary) home folder.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env, docker_calls
from train.launch.jobs import script_path
from utils.spec.registry import frameworks_on, model_names, platform_names

NOT_PACKAGES = {"tests"}
LIBRARY_MARK = "# shellcheck shell="


def _packages() -> list[Path]:
    return sorted(p.parent for p in REPO.glob("*/__init__.py") if p.parent.name not in NOT_PACKAGES)


def _has_main_block(path: Path) -> bool:
    """A top-level ``if __name__ == "__main__":`` (either operand order)."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1:
            sides = [node.test.left, node.test.comparators[0]]
            names = {s.id for s in sides if isinstance(s, ast.Name)}
            values = {s.value for s in sides if isinstance(s, ast.Constant)}
            if names == {"__name__"} and values == {"__main__"}:
                return True
    return False


def python_entry_points() -> list[str]:
    """Dotted names a user may run with ``python -m``: packages with ``__main__.py``, modules with a main block."""
    found = set()
    for package in _packages():
        for path in package.rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            if path.name == "__main__.py":
                found.add(".".join(parts[:-1]))
            elif path.name != "__init__.py" and _has_main_block(path):
                found.add(".".join(parts))
    return sorted(found)


def shell_entry_points() -> list[str]:
    """Scripts a user runs: ``shell/*`` and ``*.sh`` in the packages, less the sourced libraries."""
    candidates = [p for p in (REPO / "shell").iterdir() if p.is_file()]
    candidates += [p for package in _packages() for p in package.rglob("*.sh")]
    return sorted(
        p.relative_to(REPO).as_posix() for p in candidates
        if p.read_text().startswith("#!") and LIBRARY_MARK not in p.read_text()
    )


JOB_SCRIPT_TEXT = ('#!/usr/bin/env bash\n'
                   'exec "$(dirname "${{BASH_SOURCE[0]}}")/launch/launch.sh" {platform} {framework} {model} "$@"\n')
# Each job of the registry by its script (train/launch/jobs.py names it; tests/house/test_tree.py holds train/'s
# scripts equal to these): its (platform, framework, model).
JOBS = {script_path(platform, framework, model).relative_to(REPO).as_posix(): (platform, framework, model)
        for platform in platform_names() for framework in frameworks_on(platform) for model in model_names()}


def job_scripts() -> list[str]:
    """The ``train/train_<platform>_<framework>_<model>.sh`` one-liners among the shell entry points."""
    return [name for name in shell_entry_points() if name in JOBS]


def one_job_script_per_platform() -> set[str]:
    """The job scripts whose ``--help`` runs: the first of each platform. The others are the same line with other
    arguments (:func:`test_every_job_script_is_the_launch_one_liner_of_its_name`), so their ``--help`` is
    ``train/launch/launch.sh``'s with other words; running all 36 cost about 40 s of CPU (1.1 s each: the
    launcher's imports) and found nothing the three do not."""
    first: dict[str, str] = {}
    for name in job_scripts():
        first.setdefault(JOBS[name][0], name)
    return set(first.values())


PYTHON_ENTRY_POINTS = python_entry_points()
SHELL_ENTRY_POINTS = [name for name in shell_entry_points()
                      if name not in JOBS or name in one_job_script_per_platform()]


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


Answers = dict[str, tuple[Future, dict[str, str]]]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Answers]:
    """Every entry point's ``--help``, started together (one process each, as many at once as cores)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        started = {}
        for name in PYTHON_ENTRY_POINTS + SHELL_ENTRY_POINTS:
            env = clean_env(tmp_path_factory.mktemp("entry"))
            argv = [sys.executable, "-m", name] if name in PYTHON_ENTRY_POINTS else ["bash", str(REPO / name)]
            started[name] = (pool.submit(_run, [*argv, "--help"], env), env)
        yield started


def _check(answers: Answers, name: str) -> None:
    future, env = answers[name]
    proc = future.result()
    shown = f"{name} --help exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert proc.returncode == 0, shown
    assert "usage" in proc.stdout.lower(), shown
    assert "Traceback" not in proc.stdout + proc.stderr, shown
    assert not docker_calls(env), f"{name} --help started a container"
    written = sorted(str(p) for p in Path(env["HOME"]).rglob("*"))
    assert not written, f"{name} --help wrote in the home folder: {written}"


@pytest.mark.parametrize("module", PYTHON_ENTRY_POINTS)
def test_python_module_answers_help(answers: Answers, module: str) -> None:
    _check(answers, module)


@pytest.mark.parametrize("script", SHELL_ENTRY_POINTS)
def test_shell_script_answers_help(answers: Answers, script: str) -> None:
    _check(answers, script)


def test_every_job_script_is_the_launch_one_liner_of_its_name() -> None:
    """What lets one job script per platform stand for all of them in the ``--help`` runs above."""
    scripts = job_scripts()
    assert len(scripts) > len(one_job_script_per_platform()) >= 3, scripts
    for name in scripts:
        path = REPO / name
        platform, framework, model = JOBS[name]
        assert path.read_text() == JOB_SCRIPT_TEXT.format(platform=platform, framework=framework, model=model), name
        assert os.access(path, os.X_OK), f"{name} is not executable"


def test_discovery_finds_the_entry_points_of_every_layer() -> None:
    """The discovery itself: each package has commands, shell/ has its scripts, libraries stay out."""
    for package in ("utils", "data", "train", "evaluate", "bench"):
        assert any(m.startswith(f"{package}.") for m in PYTHON_ENTRY_POINTS), package
    assert any((REPO / m.replace(".", "/") / "__main__.py").is_file() for m in PYTHON_ENTRY_POINTS), \
        "a package's __main__.py counts"
    assert {"shell/test.sh", "shell/train.sh", "shell/slurm.sbatch"} <= set(SHELL_ENTRY_POINTS)
    assert not {"shell/platform.sh", "shell/docker.sh", "shell/jobctl.sh"} & set(SHELL_ENTRY_POINTS)
    assert any(s.startswith("train/") for s in SHELL_ENTRY_POINTS) and any(
        s.startswith("evaluate/") for s in SHELL_ENTRY_POINTS)
