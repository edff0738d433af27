"""Platform detection with faked tools (in Python, and through the shell, which asks Python), and the peak table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import utils.machine.hardware
from tests.helpers.paths import REPO
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.machine.hardware import collect_gpu_info, detect_platform, peak_tflops, resolve_platform


def fake_tools(tmp_path: Path, *tools: str, nvidia_ok: bool = True) -> dict[str, str]:
    """A PATH holding only fake vendor tools (plus the basics the shell needs) and a fake /dev."""
    bin_dir, dev = tmp_path / "bin", tmp_path / "dev"
    bin_dir.mkdir(exist_ok=True)
    dev.mkdir(exist_ok=True)
    for tool in tools:
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\nexit {0 if nvidia_ok else 9}\n")
        script.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "TPRIMAT_DEV_DIR": str(dev)}


def shell_platform(env: dict[str, str]) -> subprocess.CompletedProcess:
    script = f'source "{REPO}/shell/platform.sh" && tprimat_resolve_platform'
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("tools", "kfd", "nvidia_ok", "expected"),
    [
        (("amd-smi",), True, True, "amd"),
        (("rocm-smi",), True, True, "amd"),
        (("amd-smi",), False, True, "cpu"),  # a tool without /dev/kfd is not a GPU
        (("nvidia-smi",), False, True, "nvd"),
        (("nvidia-smi",), False, False, "cpu"),  # nvidia-smi present but failing
        ((), False, True, "cpu"),
    ],
)
def test_detection_python_and_shell_agree(tmp_path, monkeypatch, tools, kfd, nvidia_ok, expected):
    env = fake_tools(tmp_path, *tools, nvidia_ok=nvidia_ok)
    if kfd:
        (Path(env["TPRIMAT_DEV_DIR"]) / "kfd").touch()
    monkeypatch.setenv("PATH", env["PATH"])
    assert detect_platform(environ=env) == expected
    # The shell reads config.env's PLATFORM= (empty) and must detect the same.
    proc = shell_platform({**env, "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


def test_platform_override_and_bad_value(tmp_path):
    env = fake_tools(tmp_path, "nvidia-smi")
    assert detect_platform(environ={**env, "PLATFORM": "amd"}) == "amd"
    with pytest.raises(ValueError, match="PLATFORM='tpu' is not valid; use one of: amd, nvd, cpu"):
        detect_platform(environ={**env, "PLATFORM": "tpu"})
    assert shell_platform({**env, "PLATFORM": "amd"}).stdout.strip() == "amd"
    proc = shell_platform({**env, "PLATFORM": "tpu"})
    assert proc.returncode == 2 and "PLATFORM='tpu': allowed values are amd, nvd, cpu" in proc.stderr


def test_a_rocm_torch_means_amd_without_any_tool(tmp_path, monkeypatch):
    """The check shell/platform.sh once lacked: now the shell asks this same function."""
    env = fake_tools(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setattr(utils.machine.hardware, "torch_version", lambda: SimpleNamespace(hip="6.4.1", cuda=None))
    monkeypatch.setattr(utils.machine.hardware, "_torch", lambda: pytest.fail("a ROCm build needs no torch import"))
    assert detect_platform(environ=env) == "amd"


def test_a_cuda_torch_is_nvd_only_when_it_sees_a_device(tmp_path, monkeypatch):
    env = fake_tools(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setattr(utils.machine.hardware, "torch_version", lambda: SimpleNamespace(hip=None, cuda="12.8"))
    for seen, expected in ((True, "nvd"), (False, "cpu")):
        cuda_torch = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda seen=seen: seen))
        monkeypatch.setattr(utils.machine.hardware, "_torch", lambda cuda_torch=cuda_torch: cuda_torch)
        assert detect_platform(environ=env) == expected


def test_detection_on_a_cpu_torch_does_not_import_torch(tmp_path):
    """shell/platform.sh asks this in every script on a machine without GPU tools: torch's import (about 3.6 s of
    CPU on the 2-core host) is not needed to see a CPU build (utils/machine/torch_build.py)."""
    ask = ("import json, sys; from utils.machine.hardware import detect_platform; "
           "print(json.dumps([detect_platform(), 'torch' in sys.modules]))")
    env = {**fake_tools(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", ask], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == ["cpu", False]


def test_resolve_platform_order_environment_then_config_then_detection(tmp_path, monkeypatch):
    env = fake_tools(tmp_path, "nvidia-smi")
    monkeypatch.setenv("PATH", env["PATH"])
    config = tmp_path / "c.env"
    config.write_text("PLATFORM=amd\n")
    assert resolve_platform(environ={**env, "TPRIMAT_CONFIG": str(config)}) == "amd"
    assert resolve_platform(environ={**env, "TPRIMAT_CONFIG": str(config), "PLATFORM": "cpu"}) == "cpu"
    config.write_text("PLATFORM=\n")
    assert resolve_platform(environ={**env, "TPRIMAT_CONFIG": str(config)}) == "nvd"
    assert resolve_platform(load_config(config, environ={"PLATFORM": "amd"})) == "amd"
    config.write_text("PLATFORM=x86\n")
    with pytest.raises(ConfigError, match="PLATFORM='x86': allowed values are amd, nvd, cpu"):
        resolve_platform(environ={**env, "TPRIMAT_CONFIG": str(config)})


def test_platform_cli(tmp_path):
    env = {**fake_tools(tmp_path, "nvidia-smi"), "HOME": str(tmp_path)}
    run = [sys.executable, "-m", "utils.machine.hardware", "--platform"]
    repo = REPO
    proc = subprocess.run(run, env=env, cwd=repo, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "nvd\n"), proc.stderr
    proc = subprocess.run(run, env={**env, "PLATFORM": "gpu"}, cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "config error: PLATFORM='gpu': allowed values are amd, nvd, cpu"


@pytest.mark.parametrize(
    ("name", "precision", "value"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "fp8", 1978.9),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA H100 NVL", "bf16", 835.5),  # must not fall through to the SXM entry
        ("NVIDIA H200", "bf16", 989.4),
        ("NVIDIA B200", "fp8", 4500.0),
        ("AMD Instinct MI300X", "bf16", 1307.4),
        ("AMD Instinct MI325X", "fp8", 2614.9),
        ("AMD Instinct MI355X", "bf16", 2500.0),
    ],
)
def test_peak_table(name, precision, value):
    assert peak_tflops(name, precision) == (value, None)


def test_unknown_device_has_no_guessed_peak():
    value, reason = peak_tflops("NVIDIA A100-SXM4-80GB", "bf16")
    assert value is None and "not in the peak table" in reason
    value, reason = peak_tflops(None)
    assert value is None and "no accelerator" in reason


def test_cpu_gpu_info_is_honest_about_absence():
    info = collect_gpu_info("cpu")
    assert info.device_count == 0 and info.device_name is None and info.software_stack == "cpu"
    assert info.peak_tflops.bf16 is None and info.peak_tflops.fp8 is None
    assert "MFU not computed" in info.peak_tflops_reason
    assert info.pytorch_version and info.pytorch_version.startswith("2.")
    assert os.cpu_count() and info.cpu_name
