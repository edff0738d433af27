"""Review fixes of the shell layer: platform resolution, the container's config, secrets.env, --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers_shell import REPO, clean_env, copy_repo, docker_calls, docker_env_files, flag_values, run_script

# Sourced libraries, not commands.
LIBRARIES = {"shell/platform.sh", "shell/docker.sh", "shell/paths.sh"}
ENTRY_POINTS = [
    *sorted({p.relative_to(REPO).as_posix() for p in (REPO / "shell").glob("*.sh")} - LIBRARIES),
    "shell/slurm.sbatch",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_repo(tmp_path / "repo")


@pytest.mark.parametrize("script", ENTRY_POINTS)
def test_every_script_answers_help(script: str, tmp_path: Path) -> None:
    proc = run_script(REPO, script, "--help", env=clean_env(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower()
    assert not docker_calls(clean_env(tmp_path)), "--help starts nothing"


@pytest.mark.parametrize(("line", "expected"), [
    ("PLATFORM=cpu", "cpu"),
    ('PLATFORM="nvd"', "nvd"),
    ("export PLATFORM='amd'  # the cluster", "amd"),
])
def test_platform_comes_from_the_same_config_file_as_python(tmp_path: Path, line: str, expected: str) -> None:
    """TPRIMAT_CONFIG is the file utils/configure.py reads; platform.sh must read the same one."""
    config = tmp_path / "my.env"
    config.write_text(f"# mine\n{line}\n")
    script = f'source "{REPO}/shell/platform.sh"; tprimat_resolve_platform'
    proc = subprocess.run(["bash", "-c", script], env=clean_env(tmp_path, TPRIMAT_CONFIG=str(config)),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


def test_invalid_platform_in_the_config_file_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "my.env"
    config.write_text("PLATFORM=amd64\n")
    script = f'source "{REPO}/shell/platform.sh"; tprimat_resolve_platform'
    proc = subprocess.run(["bash", "-c", script], env=clean_env(tmp_path, TPRIMAT_CONFIG=str(config)),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "amd64" in proc.stderr


def test_container_config_leaves_gbs_derived(repo: Path, tmp_path: Path) -> None:
    """The rendered env file must not pin GBS, or MBS=2 inside the container (entry.sh) is an error."""
    env = clean_env(tmp_path, PLATFORM="nvd", DATA_DIR=str(tmp_path / "data"), HF_HOME=str(tmp_path / "hf"))
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    number = next(i for i, call in enumerate(docker_calls(env), start=1) if call[0] == "run")
    lines = docker_env_files(env, number)[0].splitlines()
    assert not [line for line in lines if line.startswith("GBS=")]
    container_env = dict(line.split("=", 1) for line in lines)
    container_env.update(PLATFORM="nvd", MBS="2", PATH="/usr/bin:/bin")
    check = subprocess.run([sys.executable, "-m", "utils.configure", "--get", "GBS"], cwd=REPO,
                           env=container_env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == str(2 * int(container_env["DP"]) * int(container_env["GA"]))


@pytest.mark.parametrize("line", ["HF_TOKEN={token} # my token", "HF_TOKEN={token}\r"])
def test_secret_lines_docker_would_mangle_are_refused(repo: Path, tmp_path: Path, line: str) -> None:
    """docker --env-file keeps a trailing comment or a CR in the value; the native loader does not."""
    token = "hf_MANGLEDtokenabcdefghijk"
    (repo / "secrets.env").write_text(line.format(token=token) + "\n")
    env = clean_env(tmp_path, PLATFORM="amd", DATA_DIR=str(tmp_path / "data"), HF_HOME=str(tmp_path / "hf"))
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode != 0
    assert "HF_TOKEN" in proc.stderr
    assert token not in proc.stdout + proc.stderr
    assert not [c for c in docker_calls(env) if c[0] == "run"]


def test_a_plain_secrets_file_still_passes(repo: Path, tmp_path: Path) -> None:
    (repo / "secrets.env").write_text("# comment\nHF_TOKEN=hf_PLAINtokenabcdefghijklm\nOTHER=a#b\n")
    env = clean_env(tmp_path, PLATFORM="nvd", DATA_DIR=str(tmp_path / "data"), HF_HOME=str(tmp_path / "hf"))
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    run = next(call for call in docker_calls(env) if call[0] == "run")
    assert flag_values(run, "--env-file")[-1] == str(repo / "secrets.env")


def test_slurm_node_rejects_an_unknown_step(tmp_path: Path) -> None:
    proc = run_script(REPO, "shell/slurm_node.sh", "bogus", env=clean_env(tmp_path, SLURM_NODEID="0", NNODES="2"))
    assert proc.returncode == 2 and "data or train" in proc.stderr
