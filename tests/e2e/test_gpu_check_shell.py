"""shell/gpu_check.sh: --help, its refusals, the image dispatch, and the native flow with stand-ins.

The flow runs in a copy of the repository whose prescreen device is the tests' fake H100 (put into
the copy's utils/machine/prescreen.py) and whose nvd launchers are stand-ins recording the workload
they were given, so it checks the orchestration alone, never a figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.shell import docker_calls, run_script, script_env

RECORDED = ("MODEL_LAYERS", "TRAIN_ITERS", "MODELS", "DP", "GA", "MBS", "SL", "GPUS_PER_NODE", "PLATFORM")
STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") {fields}" >> "$JOB_LOG"
exit 0
"""
FAKE_DEVICE = """

# --- put here by tests/e2e/test_gpu_check_shell.py: the fake H100 of tests/helpers/devices.py ---
def open_device(platform, index=0):
    from tests.helpers.devices import h100

    return h100()
"""


def test_help(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/gpu_check.sh", "--help", env=script_env(tmp_path))
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: shell/gpu_check.sh [--native] [--help]")
    for words in ("prescreen", "MODEL_LAYERS=8", "OUTPUT_DIR/gpu_check.md", "ready / degraded / broken", "--native"):
        assert words in proc.stdout
    assert docker_calls(script_env(tmp_path)) == []


def test_unknown_argument_is_exit_2(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/gpu_check.sh", "--fast", env=script_env(tmp_path))
    assert proc.returncode == 2 and proc.stderr.splitlines()[0] == "gpu_check.sh: unknown argument '--fast'"


def test_no_gpu_detected_is_one_line_and_exit_2(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/gpu_check.sh", env=script_env(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "gpu_check.sh: platform cpu has no GPU to check (run it on an nvd or amd node, or set PLATFORM=nvd|amd)"]


def test_unknown_platform_is_one_line_and_exit_2(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/gpu_check.sh", env=script_env(tmp_path, PLATFORM="tpu"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["config error: PLATFORM='tpu': allowed values are amd, nvd, cpu"]


def test_forced_platform_without_a_gpu_is_one_line_and_exit_2(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/gpu_check.sh", "--native", env=script_env(tmp_path, PLATFORM="nvd"))
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("prescreen: platform nvd but torch") and line.endswith("sees no GPU 0: nothing to prescreen")
    assert not (tmp_path / "out" / "gpu_check").exists()  # nothing half-made


@pytest.mark.parametrize("code", ["0", "1"])
def test_runs_itself_natively_inside_the_image(repo: Path, tmp_path: Path, code: str) -> None:
    env = script_env(tmp_path, PLATFORM="nvd", FAKE_DOCKER_RUN_RC=code)
    proc = run_script(repo, "shell/gpu_check.sh", env=env)
    assert proc.returncode == int(code)
    runs = [call for call in docker_calls(env) if call[0] == "run"]
    assert len(runs) == 1
    image_at = runs[0].index("tprimat:nvd")
    assert runs[0][image_at + 1:] == ["bash", "shell/gpu_check.sh", "--native"]
    assert "--gpus" in runs[0][:image_at]


def _stand_ins(repo: Path) -> None:
    fields = " ".join(f"{key}=${key}" for key in RECORDED)
    for script in (repo / "train").glob("train_nvd_*_llama.sh"):
        script.write_text(STAND_IN.format(fields=fields))
    (repo / "evaluate" / "compare.py").unlink()  # train.sh's comparison is not what this tests
    module = repo / "utils" / "machine" / "prescreen.py"
    main_guard = '\n\nif __name__ == "__main__":'
    module.write_text(module.read_text().replace(main_guard, FAKE_DEVICE + main_guard))


def test_native_flow_runs_the_proxy_through_train_sh_and_writes_the_table(repo: Path, tmp_path: Path) -> None:
    _stand_ins(repo)
    env = script_env(tmp_path, PLATFORM="nvd", FRAMEWORK="tran deep")
    proc = run_script(repo, "shell/gpu_check.sh", "--native", env=env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the stand-ins write no result: broken
    jobs = (tmp_path / "jobs.log").read_text().splitlines()
    workload = "MODEL_LAYERS=8 TRAIN_ITERS=30 MODELS=llama DP=1 GA=4 MBS=2 SL=2048 GPUS_PER_NODE=1 PLATFORM=nvd"
    assert jobs == [f"train_nvd_tran_llama.sh {workload}", f"train_nvd_deep_llama.sh {workload}"]
    table = (tmp_path / "out" / "gpu_check.md").read_text()
    # train.sh records each job incomplete before it starts; the stand-ins never finish it
    assert "**Verdict: broken: tran: incomplete: shell/train.sh started this job" in table
    assert (tmp_path / "out" / "gpu_check.json").is_file()
