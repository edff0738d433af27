"""evaluate/probe.py: a system snapshot usable on its own, honest on a machine without GPUs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers.proc import run_module


def test_probe_writes_a_snapshot_without_secrets(tmp_path: Path) -> None:
    env = {**os.environ, "PLATFORM": "cpu", "NCCL_DEBUG": "INFO", "HF_TOKEN": "hf_secret_value",
           "NCCL_API_KEY": "also_secret", "TPRIMAT_IMAGE": "tprimat:cpu-test"}
    target = tmp_path / "snap" / "probe.json"
    proc = run_module("evaluate.probe", "--output", str(target), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = target.read_text()
    assert "hf_secret_value" not in text and "also_secret" not in text
    snap = json.loads(text)
    assert snap["platform"] == "cpu"
    assert snap["gpu_info"]["device_count"] == 0 and snap["gpu_info"]["peak_tflops"] == {"bf16": None, "fp8": None}
    assert "no GPU tools" in snap["gpus"]["reason"]
    assert snap["environment"]["variables"]["NCCL_DEBUG"] == "INFO"
    assert snap["environment"]["image"]["tag"] == "tprimat:cpu-test"
    assert snap["torch"]["version"] and snap["cpu"]["logical_cpus"] >= 1
    assert snap["cpu"]["memory_total_gb"] > 0
    assert not list(target.parent.glob(".*.tmp"))  # written atomically, no temp file left


def test_probe_prints_json_to_stdout_and_has_help() -> None:
    env = {**os.environ, "PLATFORM": "cpu"}
    proc = run_module("evaluate.probe", env=env, timeout=120)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["probe_version"] == 1
    help_proc = run_module("evaluate.probe", "--help", env=env, timeout=60)
    assert help_proc.returncode == 0 and "--output" in help_proc.stdout
