"""Readers written for the older tools keep working on a new result.

Seed 003's README shows the result format its tools read (``platform``, ``gpu_info``,
``training_config.{max_steps, global_batch_size, micro_batch_size, sequence_length,
num_gpus}``, ``performance_metrics.{avg_step_time_seconds, tokens_per_second,
tokens_per_second_per_gpu}``, ``step_times``, ``loss_values``); seed 004's
``nvd_compare`` adds ``performance_metrics.total_time_seconds`` and ``learning_rates``.
The result read here is made by the real producer from a fixture log and read back as
plain JSON, exactly as those readers do.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers.megatron import FIXTURES, make_config
from train.logs import build_result
from utils.result.file import write_result
from utils.schema.hardware import GpuInfo

H100 = GpuInfo(device_name="NVIDIA H100 80GB HBM3", device_count=8, total_memory_gb=79.6, software_stack="cuda",
               software_version="12.8", pytorch_version="2.7", driver_version=None,
               peak_tflops={"bf16": 989.4, "fp8": 1978.9})


def test_a_new_result_has_every_field_the_seed_readers_use(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    result = build_result(cfg, log_path=FIXTURES / "megatron_core012_llama.log", platform="nvd", framework="mega",
                          model="llama", returncode=0, gpu_info=H100)
    path = write_result(tmp_path / "train_nvd_mega_llama.json", result)
    data = json.loads(path.read_text(encoding="utf-8"))  # plain JSON, as the older tools load it

    # seed 003 (README "Results")
    assert data["platform"] == "nvd"
    gpu = data["gpu_info"]
    assert (gpu["device_name"], gpu["device_count"], gpu["total_memory_gb"]) == ("NVIDIA H100 80GB HBM3", 8, 79.6)
    config = data["training_config"]
    assert (config["max_steps"], config["global_batch_size"], config["micro_batch_size"],
            config["sequence_length"], config["num_gpus"]) == (10, 64, 1, 2048, 8)
    perf = data["performance_metrics"]
    times = data["step_times"]
    assert len(times) == 10 and all(isinstance(t, float) for t in times)
    assert perf["avg_step_time_seconds"] == pytest.approx(sum(times[2:]) / 8)  # warm-up excluded
    assert perf["tokens_per_second"] == pytest.approx(64 * 2048 / perf["median_step_time_seconds"])
    assert perf["tokens_per_second_per_gpu"] == pytest.approx(perf["tokens_per_second"] / 8)
    assert len(data["loss_values"]) == 10 and data["loss_values"][0] == pytest.approx(11.93)

    # seed 004 (nvd_compare): total time and learning rates beside the final loss of its table
    assert perf["total_time_seconds"] == pytest.approx(math.fsum(times))
    assert len(data["learning_rates"]) == 10 and data["learning_rates"][1] == pytest.approx(3e-4, rel=1e-3)
    assert data["loss_values"][-1] == pytest.approx(7.52)
