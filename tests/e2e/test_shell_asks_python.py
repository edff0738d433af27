"""The shell layer is thin: it asks Python for the platform, config values and the container's env file.

Platform detection, config.env and secrets.env parsing exist only in Python (utils/machine/hardware.py,
utils/config/load.py, utils/config/secret.py); these tests hold the shell to that and check what the
user sees through it: the platform from the same file Python reads, secrets.env read as a shell reads
it, and nothing secret in argv or output. (--help of every script: tests/house/test_entry_points.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env, docker_calls, docker_env_files, run_script


@pytest.mark.parametrize(("line", "expected"), [
    ("PLATFORM=cpu", "cpu"),
    ('PLATFORM="nvd"', "nvd"),
    ("export PLATFORM='amd'  # the cluster", "amd"),
])
def test_platform_comes_from_the_same_config_file_as_python(tmp_path: Path, line: str, expected: str) -> None:
    """TPRIMAT_CONFIG is the file utils/config/load.py reads; platform.sh must read the same one."""
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
    check = subprocess.run([sys.executable, "-m", "utils.config.load", "--get", "GBS"], cwd=REPO,
                           env=container_env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == str(2 * int(container_env["DP"]) * int(container_env["GA"]))


TOKEN = "hf_SHELLREADtokenabcdefghij"


@pytest.mark.parametrize("text", [
    f"HF_TOKEN={TOKEN}\n",
    f"HF_TOKEN={TOKEN} # my token\n",
    f"HF_TOKEN={TOKEN}\r\n",
    f"# notes\r\nexport HF_TOKEN='{TOKEN}'\r\n",
    f'HF_TOKEN="{TOKEN}"  # quoted\n',
    f"\ufeffHF_TOKEN={TOKEN}\nOTHER=a#b\n",
], ids=["plain", "comment", "crlf", "export-quoted-crlf", "double-quoted", "bom-and-other-key"])
def test_secrets_env_is_read_as_a_shell_reads_it(repo: Path, tmp_path: Path, text: str) -> None:
    """docker --env-file would keep quotes, comments and CRs in the value; the rendered file holds the token."""
    (repo / "secrets.env").write_text(text, newline="")
    env = clean_env(tmp_path, PLATFORM="amd", DATA_DIR=str(tmp_path / "data"), HF_HOME=str(tmp_path / "hf"))
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    number, run = next((i, c) for i, c in enumerate(docker_calls(env), start=1) if c[0] == "run")
    assert [line for line in docker_env_files(env, number)[0].splitlines() if "TOKEN" in line] == [f"HF_TOKEN={TOKEN}"]
    assert "OTHER" not in docker_env_files(env, number)[0], "only the secrets tprimat uses reach the container"
    assert not any(TOKEN in arg for arg in run) and TOKEN not in proc.stdout + proc.stderr


@pytest.mark.parametrize("line", [f'HF_TOKEN="{TOKEN}', f"HF_TOKEN={TOKEN};extra", f"HF_TOKEN=$HOME{TOKEN}", TOKEN])
def test_a_secrets_line_a_shell_would_read_differently_is_refused_without_echoing_it(
        repo: Path, tmp_path: Path, line: str) -> None:
    (repo / "secrets.env").write_text(f"# first\n{line}\n")
    env = clean_env(tmp_path, PLATFORM="nvd", DATA_DIR=str(tmp_path / "data"), HF_HOME=str(tmp_path / "hf"))
    proc = run_script(repo, "shell/run_train.sh", env=env)
    assert proc.returncode == 2
    assert f"{repo / 'secrets.env'}:2" in proc.stderr and proc.stderr.count("config error") == 1
    assert TOKEN not in proc.stdout + proc.stderr
    assert not [c for c in docker_calls(env) if c[0] == "run"]
    assert not list(tmp_path.glob("tprimat-docker.env.*")), "no env file left behind"


# Shell code (comments, echo lines and here-doc help text aside) must not detect devices, and must not
# even name config.env or secrets.env: a file a script never names, it cannot parse.
_DETECTION = re.compile(r"nvidia-smi|amd-smi|rocm-smi|(?<!--device=/dev/)\bkfd\b|TPRIMAT_DEV_DIR")
_ENV_FILE = re.compile(r"\b(config|secrets)\.env\b")
SHELL_CODE = sorted([*(REPO / "shell").glob("*.sh"), REPO / "shell" / "slurm.sbatch", *(REPO / "train").rglob("*.sh"),
                     *(REPO / "evaluate").glob("*.sh")])
# wrap.sh's token check still reads secrets.env itself: moving it onto utils/config/secret.py is part of
# issue 12's wrap work (with the symlink fix), which builds on this layer.
NOT_YET_THIN = {"shell/wrap.sh"}


def _code_lines(text: str) -> list[str]:
    lines, heredoc_end = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if heredoc_end is not None:
            heredoc_end = None if stripped == heredoc_end else heredoc_end
            continue
        if match := re.search(r"<<-?\s*'?(\w+)'?", line):
            heredoc_end = match.group(1)
        if stripped and not stripped.startswith(("#", "echo ")):
            lines.append(line)
    return lines


def _offending(text: str) -> tuple[list[str], list[str]]:
    code = _code_lines(text)
    return [line for line in code if _DETECTION.search(line)], [line for line in code if _ENV_FILE.search(line)]


@pytest.mark.parametrize("script", SHELL_CODE, ids=lambda p: p.relative_to(REPO).as_posix())
def test_shell_code_neither_detects_the_platform_nor_reads_env_files(script: Path) -> None:
    name = script.relative_to(REPO).as_posix()
    detection, env_files = _offending(script.read_text())
    assert not detection, f"{name} detects the platform itself: {detection}"
    if name not in NOT_YET_THIN:
        assert not env_files, f"{name} handles config.env or secrets.env itself: {env_files}"


def test_the_structural_check_catches_the_old_shell_layer() -> None:
    """Run on the lines platform.sh and docker.sh had before the shell asked Python, it flags them."""
    old = """\
tprimat_detect_platform() {
    if [[ -e "$dev/kfd" ]] && { command -v amd-smi >/dev/null 2>&1; }; then
        echo amd
    fi
}
    local requested="${PLATFORM:-}" config="${TPRIMAT_CONFIG:-$TPRIMAT_ROOT/config.env}"
    if [[ -f "$TPRIMAT_ROOT/secrets.env" ]]; then
"""
    detection, env_files = _offending(old)
    assert len(detection) == 1 and len(env_files) == 2


PYTHON_STAND_IN = """#!/usr/bin/env bash
# Answers like tprimat's Python modules would, but with values no file holds.
echo "$*" >> "$PYTHON_CALLS"
case "$*" in
    "-m utils.machine.hardware --platform") echo nvd ;;
    "-m utils.config.load --get "*) echo "from-python-${*: -1}" ;;
    *) exit 9 ;;
esac
"""


def test_the_shell_uses_whatever_python_answers(repo: Path, tmp_path: Path) -> None:
    """config.env says amd, Python (a stand-in here) says nvd: the shell goes with Python, asked from the root."""
    (repo / ".venv").unlink()
    (repo / ".venv" / "bin").mkdir(parents=True)
    stand_in = repo / ".venv" / "bin" / "python"
    stand_in.write_text(PYTHON_STAND_IN)
    stand_in.chmod(0o755)
    (repo / "config.env").write_text("PLATFORM=amd\nOUTPUT_DIR=/from/the/file\n")
    script = f'source "{repo}/shell/platform.sh"; tprimat_resolve_platform; tprimat_config_get OUTPUT_DIR'
    calls = tmp_path / "calls"
    proc = subprocess.run(["bash", "-c", script], env=clean_env(tmp_path, PYTHON_CALLS=str(calls)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["nvd", "from-python-OUTPUT_DIR"]
    assert calls.read_text().splitlines() == ["-m utils.machine.hardware --platform",
                                              "-m utils.config.load --get OUTPUT_DIR"]


def test_slurm_node_rejects_an_unknown_step(tmp_path: Path) -> None:
    proc = run_script(REPO, "shell/slurm_node.sh", "bogus", env=clean_env(tmp_path, SLURM_NODEID="0", NNODES="2"))
    assert proc.returncode == 2 and "data or train" in proc.stderr
