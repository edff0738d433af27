"""Issue 33, family 6: GPU jobs on a host without that GPU are refused before launch, unless forced.

``shell/train.sh`` in a throwaway copy with stand-in job scripts, and the real ``train/train_<platform>_*.sh``
run directly (the launcher asks the same question); the host's devices are faked with an empty
``TPRIMAT_DEV_DIR`` (utils/machine/hardware.py ``device_problem``). Forced, tran on nvd records the worker's own
line as the reason, not the traceback torchrun prints after it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import FIXTURES, REPO
from tests.helpers.shell import script_env
from utils.dataset.paths import job_data
from utils.machine.hardware import device_problem
from utils.spec.models import workload_shape

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
    assert "must be 1, true or yes" in device_problem("cpu", {"TPRIMAT_FORCE_PLATFORM": "ture"}, str(empty))
    assert device_problem("cpu", {"TPRIMAT_FORCE_PLATFORM": " No "}, str(empty)) is None


NO_GPU = shutil.which("nvidia-smi") is None


@pytest.mark.skipif(not NO_GPU, reason="this host has nvidia-smi")
@pytest.mark.parametrize("script", ["train_nvd_tran_llama.sh", "train_amd_tran_qwen.sh"])
def test_a_gpu_job_script_run_directly_is_refused_before_launch(tmp_path: Path, script: str) -> None:
    env = _env(tmp_path, "cpu", False)  # PLATFORM in the environment does not matter: the script names its own
    proc = subprocess.run(["bash", str(REPO / "train" / script)], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    platform = script.split("_")[1]
    assert lines[0].startswith(f"tprimat: PLATFORM={platform} but this host has no"), lines
    assert not Path(env["OUTPUT_DIR"]).exists() or not any(Path(env["OUTPUT_DIR"]).glob("train_*")), "nothing written"
    dry = subprocess.run(["bash", str(REPO / "train" / script), "--dry-run"], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0 and "torch.distributed.run" in dry.stdout, dry.stderr  # the dry run plans any platform


@pytest.mark.skipif(not NO_GPU, reason="this host has nvidia-smi")
def test_a_force_switch_that_is_no_switch_is_refused(tmp_path: Path) -> None:
    env = {**_env(tmp_path, "cpu", False), "TPRIMAT_FORCE_PLATFORM": "ture"}
    proc = subprocess.run(["bash", str(REPO / "train" / "train_nvd_tran_llama.sh")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "tprimat: TPRIMAT_FORCE_PLATFORM=ture: must be 1, true or yes (launch anyway), or 0, false, no or empty"]


def test_forced_tran_on_nvd_without_a_gpu_records_the_workers_own_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The log of a real forced run on this GPU-less host (tests/fixtures/logs/tran_nvd_no_gpu.log): the worker's
    line, then torchrun's ChildFailedError traceback. The reason is the worker's line, in one line."""
    import utils.files.result_file as result_file
    from train.launch.context import log_path_for
    from train.launch.contract import RunContext
    from train.launch.job_result import collect_own_result
    from utils.machine.hardware import gpu_info_without_runtime

    monkeypatch.setattr(result_file, "collect_gpu_info", gpu_info_without_runtime)  # no GPU runtime to ask here
    from utils.config.load import load_config
    from utils.result.file import result_path

    log = (FIXTURES / "logs" / "tran_nvd_no_gpu.log").read_text()
    assert "Traceback" in log and "ChildFailedError" in log
    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO / "config.env"), "OUTPUT_DIR": str(tmp_path), "DP": "1",
                               "GPUS_PER_NODE": "1"})
    ctx = RunContext(cfg=cfg, platform="nvd", framework="tran", model="llama", run_index=None,
                     result_path=result_path(cfg.output_dir, "nvd", "tran", "llama"),
                     log_path=log_path_for(cfg, "nvd", "tran", "llama", None), data=job_data(cfg, "llama"),
                     shape=workload_shape(cfg, "llama"))
    ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.log_path.write_text(log)
    result = collect_own_result(ctx, 1)
    assert result is not None and result.status == "failed", result
    assert "local rank 0 needs a GPU but torch sees 0" in result.error and "\n" not in result.error, result.error
    assert "Traceback" not in result.error and "ChildFailedError" not in result.error, result.error
