"""utils/schema/v1.py: schema version 1 files, written by the version-1 code, still read as typed results.

The files in tests/fixtures/results_v1/ were written by tprimat at the last commit whose producers wrote
version 1 (see that directory's README); every number they hold must survive the migration.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers.paths import FIXTURES
from utils.result.file import ResultError, read_result, write_result
from utils.schema.v1 import MIGRATED_NOTE, migrate

FIXTURES = FIXTURES / "results_v1"
FILES = sorted(FIXTURES.glob("*.json"))


def old(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def test_the_fixtures_are_version_1_files() -> None:
    assert len(FILES) == 7
    assert {json.loads(f.read_text())["schema_version"] for f in FILES} == {1}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_version_1_file_reads_as_version_2_without_losing_a_key(path: Path, tmp_path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    result = read_result(path)
    assert result.schema_version == 2
    assert (result.status, result.error, result.platform, result.framework, result.model) == (
        data["status"], data["error"], data["platform"], data["framework"], data["model"])
    assert result.warnings[:-1] == data.get("warnings", [])
    assert result.warnings[-1] == MIGRATED_NOTE  # nothing left out beyond the known second spellings
    assert result.step_times == data["step_times"] and result.loss_values == data["loss_values"]
    assert result.learning_rates == data["learning_rates"]
    config, workload = data["training_config"], result.training_config.workload
    for key in ("DATASET", "MBS", "GBS", "SL", "LR", "TRAIN_ITERS", "TP", "DP", "GA", "PRECISION", "FP8", "SEED"):
        assert getattr(workload, key) == config[key], key
    assert result.training_config.max_steps == config["max_steps"]
    assert result.training_config.precision_effective == config["precision_effective"]
    # proxy_of_layers (MODEL_LAYERS, issue 22) is newer than version 1: null there, the model's own depth
    assert result.model_shape.model_dump(exclude={"proxy_of_layers"}) == data["model_shape"]
    assert result.model_shape.proxy_of_layers is None
    assert result.gpu_info.model_dump(exclude_defaults=True).items() <= data["gpu_info"].items()
    # a migrated result is an ordinary version-2 result: it writes and reads back unchanged
    assert read_result(write_result(tmp_path / path.name, result)) == result


def test_performance_and_the_new_total_time() -> None:
    data = old("tran_cpu_ok.json")
    perf = read_result(FIXTURES / "tran_cpu_ok.json").performance_metrics
    for key in ("measured_steps", "skipped_steps", "median_step_time_seconds", "tokens_per_second",
                "tokens_per_second_per_gpu", "mfu_reason"):
        assert getattr(perf, key) == data["performance_metrics"][key], key
    assert perf.step_time_seconds.model_dump() == data["performance_metrics"]["step_time_seconds"]
    assert perf.total_time_seconds == pytest.approx(math.fsum(data["step_times"]))


def test_tran_fingerprint_power_and_environment() -> None:
    data = old("tran_cpu_ok.json")
    result = read_result(FIXTURES / "tran_cpu_ok.json")
    assert result.fingerprint.data.hash == data["fingerprint"]["data"]["hash"]
    assert result.fingerprint.data.path == data["fingerprint"]["data"]["prefix"]
    assert result.fingerprint.data.bytes == data["fingerprint"]["data"]["bin_bytes"]
    assert result.fingerprint.code.commit == data["fingerprint"]["code"]["commit"]
    power = result.power_metrics
    assert power.energy_j is None and power.energy_source == "none"
    assert power.reason == data["power_metrics"]["reason"]
    assert result.environment.launcher_set == data["environment"]["launcher_set"]
    assert result.source.kind == "callback"


def test_a_failed_launch_keeps_its_reason() -> None:
    result = read_result(FIXTURES / "tran_cpu_failed.json")
    assert result.status == "failed" and "FP8=true is not supported by tran" in result.error
    assert result.performance_metrics is None and result.step_times == []


def test_the_callbacks_framework_reported_shape_becomes_a_disagreement_list() -> None:
    data = old("lightning_callback_ok.json")["performance_metrics"]["framework_reported"]
    reported = read_result(FIXTURES / "lightning_callback_ok.json").performance_metrics.framework_reported
    (step,) = reported.disagreements
    assert step.model_dump(exclude={"other_conventions"}) == data["step_time"]
    assert reported.flagged is True and reported.median_step_time_seconds == data["median_step_time_seconds"]
    assert data["metric"] in reported.source and data["source"] in reported.source


def test_extractions_framework_reported_memory_and_source() -> None:
    data = old("extract_primus_legacy_llama.json")
    result = read_result(FIXTURES / "extract_primus_legacy_llama.json")
    reported = result.performance_metrics.framework_reported
    assert reported.running_average == data["performance_metrics"]["framework_reported"]["framework_running_avg"]
    first = data["performance_metrics"]["framework_reported"]["disagreement"][0]
    assert reported.disagreements[0].metric == first["metric"]
    assert reported.disagreements[0].other_conventions[0].theirs == first["other_convention"][0]["theirs"]
    memory = result.memory_metrics
    assert memory.device_used_peak_gb == data["memory_metrics"]["device_used_gb"]["peak"]
    assert memory.device_used_mean_measured_gb == data["memory_metrics"]["device_used_gb"]["mean_measured"]
    assert memory.peak_allocated_gb == data["memory_metrics"]["peak_allocated_gb"]
    assert result.source.format == data["source"]["format"] and result.source.kind == "log"
    flagged = read_result(FIXTURES / "extract_primus_new_qwen.json").performance_metrics.framework_reported
    assert flagged.flagged and any(d.flagged for d in flagged.disagreements)


def test_log_energy_and_failure_problems() -> None:
    data = old("extract_megatron_energy_qwen.json")["power_metrics"]
    power = read_result(FIXTURES / "extract_megatron_energy_qwen.json").power_metrics
    assert power.energy_source == "log" and power.energy_j == data["energy_j"]
    assert power.tokens_per_kwh == data["tokens_per_kwh"]
    oom = read_result(FIXTURES / "extract_megatron_oom_llama.json")
    assert oom.status == "failed" and "out of memory" in oom.error
    assert "out of memory" in {p.kind for p in oom.source.problems}


def test_unknown_version_1_keys_are_named_not_dropped_silently(tmp_path: Path) -> None:
    data = old("tran_cpu_ok.json")
    data["training_config"]["favourite_colour"] = "blue"
    migrated = migrate(data)
    assert "training_config.favourite_colour" in migrated["warnings"][-1]
    data["step_times"] = data["step_times"][:-1]  # still broken after migration: reported, not crashed
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=r"broken\.json \(migrated from schema version 1\)"):
        read_result(path)
