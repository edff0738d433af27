"""Issue 33, family 6: GPU jobs on a host without that GPU are refused before launch, unless forced.

``shell/train.sh`` in a throwaway copy with stand-in job scripts; the host's devices are faked with an empty
``TPRIMAT_DEV_DIR`` (utils/machine/hardware.py ``device_problem``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.shell import script_env
from utils.machine.hardware import device_problem

JOB = {"FRAMEWORK": "tran", "MODELS": "llama", "TP": "1", "PP": "1", "CP": "1", "DP": "1", "GA": "1",
       "GPUS_PER_NODE": "1", "MASTER_ADDR": "127.0.0.1"}


def _env(tmp_path: Path, platform: str, force: bool) -> dict[str, str]:
    env = script_env(tmp_path, PLATFORM=platform, TPRIMAT_DEV_DIR=str(tmp_path / "no-devices"), **JOB)
    if not force:
        env.pop("TPRIMAT_FORCE_PLATFORM", None)
    return env


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_a_gpu_platform_on_a_host_without_its_gpu_is_refused_before_any_job(repo: Path, tmp_path: Path) -> None:
    ran = tmp_path / "job-ran"
    (repo / "train" / "train_nvd_tran_llama.sh").write_text(f"#!/usr/bin/env bash\ntouch {ran}\n")
    proc = subprocess.run(["bash", str(repo / "shell" / "train.sh")], env=_env(tmp_path, "nvd", False), cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and not ran.exists(), proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("tprimat: PLATFORM=nvd but this host has no")
    dry = subprocess.run(["bash", str(repo / "shell" / "train.sh"), "--dry-run"], env=_env(tmp_path, "nvd", False),
                         cwd=repo, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0 and ran.exists(), dry.stdout + dry.stderr  # the dry run works for every platform


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has nvidia-smi")
def test_the_device_check_per_platform_and_forced(tmp_path: Path) -> None:
    empty, kfd = tmp_path / "none", tmp_path / "amd"
    empty.mkdir()
    kfd.mkdir()
    (kfd / "kfd").touch()
    assert "no AMD GPU" in device_problem("amd", {}, str(empty))
    assert "no NVIDIA GPU" in device_problem("nvd", {}, str(empty))
    assert device_problem("amd", {}, str(kfd)) is None
    assert device_problem("cpu", {}, str(empty)) is None
    assert device_problem("nvd", {"TPRIMAT_FORCE_PLATFORM": "1"}, str(empty)) is None
