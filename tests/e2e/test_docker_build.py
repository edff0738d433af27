"""build.sh against the docker stand-in; the Dockerfiles, .dockerignore and the requirements install."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env, docker_calls, run_script
from utils.config.load import load_config
from utils.files.build_context import ignored, read_patterns

BASES = {"amd": "rocm/primus:v25.11", "nvd": "nvcr.io/nvidia/nemo:25.04"}


def _context_of(env: dict[str, str], call: int) -> list[str]:
    """The files docker's build context held (the fake docker lists them; build.sh removes the folder)."""
    return (Path(env["FAKE_DOCKER_DIR"]) / f"call-{call}.context").read_text().splitlines()


@pytest.mark.parametrize("platform", ["amd", "nvd"])
def test_build_argv(repo: Path, tmp_path: Path, platform: str) -> None:
    env = clean_env(tmp_path, PLATFORM=platform)
    proc = run_script(repo, "shell/build.sh", "--no-cache", env=env)
    assert proc.returncode == 0, proc.stderr
    info, build = docker_calls(env)
    context = build[-1]
    assert info == ["info"]
    ref = load_config(repo / "config.env", environ={}).megatron_ref
    assert build == ["build", "-f", f"{context}/{platform}.Dockerfile", "-t", f"tprimat:{platform}",
                     "--build-arg", f"MEGATRON_REF={ref}", "--no-cache", context]
    assert context.startswith(str(tmp_path)) and not Path(context).exists(), "a temporary context, removed after"
    files = _context_of(env, 2)
    assert f"{platform}.Dockerfile" in files and "utils/config/load.py" in files and "config.env" in files


def test_the_build_context_holds_code_only(repo: Path, tmp_path: Path) -> None:
    """A custom in-repo DATA_DIR, OUTPUT_DIR and HF_HOME never enter the context (issue 12)."""
    for folder in ("mydata/sample", "results/logs", "hf/hub"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "payload.bin").write_bytes(b"data")
    (repo / "secrets.env").write_text("HF_TOKEN=hf_notinanimage\n")
    (repo / "docs" / "linked.md").symlink_to(repo / "secrets.env")
    env = clean_env(tmp_path, PLATFORM="amd", DATA_DIR="mydata", OUTPUT_DIR=str(repo / "results"),
                    HF_HOME=str(repo / "hf"))
    proc = run_script(repo, "shell/build.sh", env=env)
    assert proc.returncode == 0, proc.stderr
    files = _context_of(env, 2)
    assert not [f for f in files if f.startswith(("mydata/", "results/", "hf/", ".venv/", "output/"))], files
    assert "secrets.env" not in files and "docs/linked.md" not in files
    assert "left out docs/linked.md (a link" in proc.stderr
    assert "DATA_DIR=mydata, OUTPUT_DIR=results, HF_HOME=hf" in proc.stdout
    assert "amd.Dockerfile" in files and "shell/install_requirements.sh" in files and "amd-requirements.txt" in files


def test_build_on_cpu_builds_nothing(repo: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path, PLATFORM="cpu")
    proc = run_script(repo, "shell/build.sh", env=env)
    assert proc.returncode == 0
    assert "no image" in proc.stdout and "shell/setup.sh" in proc.stdout
    assert docker_calls(env) == []


def test_build_without_engine_fails(repo: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path, PLATFORM="nvd", FAKE_DOCKER_INFO_RC="1")
    proc = run_script(repo, "shell/build.sh", env=env)
    assert proc.returncode == 1
    assert "no Docker engine" in proc.stderr


def test_build_failure_propagates(repo: Path, tmp_path: Path) -> None:
    env = clean_env(tmp_path, PLATFORM="amd", FAKE_DOCKER_BUILD_RC="5")
    proc = run_script(repo, "shell/build.sh", env=env)
    assert proc.returncode == 5
    assert "status 5" in proc.stderr


def test_build_detects_platform_from_devices(repo: Path, tmp_path: Path) -> None:
    """No PLATFORM anywhere: /dev/kfd plus amd-smi on PATH means amd."""
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "kfd").touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "amd-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = clean_env(tmp_path, TPRIMAT_DEV_DIR=str(dev))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    assert run_script(repo, "shell/build.sh", env=env).returncode == 0
    build = docker_calls(env)[1]
    assert build[:5] == ["build", "-f", f"{build[-1]}/amd.Dockerfile", "-t", "tprimat:amd"]


# ---------------------------------------------------------------------------
# Dockerfiles


@pytest.mark.parametrize("platform", ["amd", "nvd"])
def test_dockerfile_contract(platform: str) -> None:
    text = (REPO / f"{platform}.Dockerfile").read_text()
    instructions = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert [line for line in instructions if line.startswith("FROM ")] == [f"FROM {BASES[platform]}"]
    assert "WORKDIR /workspace/code" in instructions
    assert "COPY . /workspace/code" in instructions
    assert f"{platform}-requirements.txt" in text and "install_requirements.sh" in text
    assert "TPRIMAT_IN_CONTAINER=1" in text and "DATA_DIR=/data/tprimat" in text
    # torch is never installed over the base image's build
    assert not re.search(r"pip[^\n]*install[^\n]*\btorch\b", text)


@pytest.mark.parametrize("name", ["amd.Dockerfile", "nvd.Dockerfile", "amd-requirements.txt", "nvd-requirements.txt"])
def test_no_secret_in_image_definitions(name: str) -> None:
    text = (REPO / name).read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert "secrets.env" not in code
    # TOKEN= but not a pin such as tiktoken==0.14.0
    assert not re.search(r"HF_TOKEN|TOKEN=(?!=)|ARG\s+\w*(TOKEN|SECRET|PASSWORD)", code, re.IGNORECASE)
    assert not re.search(r"hf_[A-Za-z0-9]{20,}", text)


@pytest.mark.parametrize("name", ["amd-requirements.txt", "nvd-requirements.txt"])
def test_requirements_are_pinned_and_leave_torch_alone(name: str) -> None:
    lines = [line.strip() for line in (REPO / name).read_text().splitlines()]
    reqs = [line for line in lines if line and not line.startswith("#")]
    assert reqs, "a requirements file with nothing in it"
    for req in reqs:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", req), f"not pinned: {req}"
        assert req.split("==")[0].lower() not in ("torch", "torchvision", "torchaudio", "triton")


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    return read_patterns((REPO / ".dockerignore").read_text())


def test_pattern_matching_follows_docker() -> None:
    assert ignored("x.env", read_patterns("*.env"))
    assert not ignored("sub/x.env", read_patterns("*.env")), "Docker's `*` does not cross '/'"
    assert ignored("a/b/x.env", read_patterns("**/*.env")) and ignored("x.env", read_patterns("**/*.env"))
    assert ignored("output/a/b.json", read_patterns("output"))
    assert not ignored("config.env", read_patterns("**/*.env\n!config.env")), "the last matching line wins"
    assert ignored("a/b.txt", read_patterns("/a/")) and ignored("f1.txt", read_patterns("f[0-9].txt"))


@pytest.mark.parametrize("path", [
    "secrets.env", "sub/secrets.env", "output/train_nvd_mega_llama.json", "output.zip",
    "data_cache/bc/raw.jsonl", ".venv/bin/python", ".git/config", "utils/__pycache__/x.pyc",
    "local.env", "sub/local.env", "secrets.env.bak", "secrets.env~", ".secrets.env.swp", "docs/old/secrets.env.orig",
    ".cache/torch_extensions/py311_cpu/deepspeed_shm_comm/deepspeed_shm_comm.so",
    ".side/megatron-core-0.15.0/megatron/core/__init__.py", "history/tprimat-history.sqlite",
])
def test_dockerignore_keeps_out(path: str) -> None:
    assert ignored(path, _dockerignore_patterns())


@pytest.mark.parametrize("path", ["config.env", "secrets.env.example", "utils/config/load.py",
                                  "shell/install_requirements.sh", "nvd-requirements.txt", "evaluate/history/cli.py"])
def test_dockerignore_keeps_in(path: str) -> None:
    assert not ignored(path, _dockerignore_patterns())


def test_build_context_of_the_checkout_has_no_secrets_or_results() -> None:
    patterns = _dockerignore_patterns()
    context = []
    for dirpath, dirs, files in os.walk(REPO):
        # an ignored directory is not descended into, as docker does (and .venv is large)
        dirs[:] = [d for d in dirs if not ignored(os.path.relpath(os.path.join(dirpath, d), REPO), patterns)]
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), REPO)
            if not ignored(rel, patterns):
                context.append(rel)
    assert "config.env" in context and "amd.Dockerfile" in context
    for rel in context:
        assert not rel.endswith("secrets.env"), rel
        assert not rel.startswith(("output/", "data_cache/", ".venv/", ".git/", ".cache/", ".side/", "history/")), rel


# ---------------------------------------------------------------------------
# shell/install_requirements.sh with a stand-in interpreter

FAKE_PYTHON = """#!/usr/bin/env bash
# pip stand-in: `pip list` prints the base image's packages; `pip install` records its arguments.
if [[ "$3" == list ]]; then printf '%s\\n' $FAKE_BASE_PACKAGES; exit 0; fi
if [[ "$3" == install ]]; then
  printf '%s\\n' "$@" > "$FAKE_PIP_LOG"
  while [[ $# -gt 0 ]]; do
    case "$1" in -r) cp "$2" "$FAKE_PIP_LOG.requirements" ;; -c) cp "$2" "$FAKE_PIP_LOG.constraints" ;; esac
    shift
  done
  exit "${FAKE_PIP_RC:-0}"
fi
exit 9
"""


def _install(tmp_path: Path, base: str, requirements: str, rc: str = "0"):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    req = tmp_path / "req.txt"
    req.write_text(requirements)
    log = tmp_path / "pip.log"
    env = clean_env(tmp_path, PYTHON=str(fake), FAKE_BASE_PACKAGES=base, FAKE_PIP_LOG=str(log), FAKE_PIP_RC=rc)
    proc = run_script(REPO, "shell/install_requirements.sh", str(req), env=env)
    return proc, log


def test_install_requirements_skips_what_the_base_has(tmp_path: Path) -> None:
    base = "torch==2.7.0a0+7c8ec84dab.nv25.3 Transformers==4.48.0 PyYAML==6.0.1 megatron_core==0.12.0"
    reqs = ("# comment\ntransformers==4.51.3\nmegatron-core==0.12.0\njsonschema==4.23.0  # why\n"
            "pyyaml==6.0.2\n\ntqdm==4.67.1\n")
    proc, log = _install(tmp_path, base, reqs)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pip.log.requirements").read_text().split() == ["jsonschema==4.23.0", "tqdm==4.67.1"]
    constraints = (tmp_path / "pip.log.constraints").read_text().split()
    assert "torch==2.7.0a0+7c8ec84dab.nv25.3" in constraints, "the base torch is pinned during the install"
    assert "keeping the base image's Transformers==4.48.0" in proc.stdout
    assert "keeping the base image's PyYAML==6.0.1" in proc.stdout
    assert "--no-cache-dir" in log.read_text().split()


def test_install_requirements_nothing_missing(tmp_path: Path) -> None:
    proc, log = _install(tmp_path, "tqdm==4.67.1", "tqdm==4.66.0\n")
    assert proc.returncode == 0
    assert "already provides everything" in proc.stdout
    assert not log.exists()


def test_install_requirements_failure_fails_the_build(tmp_path: Path) -> None:
    proc, _ = _install(tmp_path, "torch==2.7.0", "jsonschema==4.23.0\n", rc="1")
    assert proc.returncode == 1
