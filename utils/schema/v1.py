"""Reading schema version 1 results: a dict written by the untyped producers -> a version 2 dict.

Why a migration and not two readers: results are kept for months and compared with new ones, but every reader should
see one shape; :func:`utils.result.file.read_result` migrates, then validates like any file. Keys with no place in
version 2 are listed in a warning, never dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from utils.schema.hardware import Environment, GpuInfo, ImageInfo
from utils.schema.measures import (
    FrameworkReported,
    MemoryMetrics,
    PerformanceMetrics,
    PowerMetrics,
    Problem,
    Profiling,
    Source,
    StepStats,
)
from utils.schema.model import Result
from utils.schema.run import (
    CodeRevision,
    EffectiveSettings,
    Fingerprint,
    HashedFiles,
    ModelShapeBlock,
    TrainingConfig,
    Workload,
)

MIGRATED_NOTE = "read from a schema version 1 file and migrated to version 2 (utils/schema/v1.py)"
NOT_RECORDED = "not recorded in the schema version 1 file"
# Version-1 keys whose content version 2 keeps under another name: dropping them loses nothing.
REDUNDANT = {
    "training_config": {"gradient_accumulation", "tensor_parallel", "pipeline_parallel", "context_parallel",
                        "data_parallel"},
    "memory_metrics": {"device_used_gb", "device_total_gb_logged"},
    "fingerprint.data": {"prefix", "bin_bytes"},
    "source": {"primus_experiment"},
    "performance_metrics.framework_reported": {"disagreement", "framework_running_avg", "metric", "step_time"},
}


def _fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


def _pick(data: Mapping[str, Any] | None, model: type[BaseModel], where: str, dropped: list[str],
          exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The keys of ``data`` that ``model`` has; the others are named in ``dropped`` unless known redundant."""
    data = data or {}
    if not isinstance(data, Mapping):  # a foreign file: a block may be anything
        raise ValueError(f"{where} is a JSON {type(data).__name__}, not an object")
    keep = _fields(model) - set(exclude)
    ignorable = REDUNDANT.get(where, set()) | set(exclude)
    dropped.extend(f"{where}.{key}" for key in data if key not in keep and key not in ignorable)
    return {key: value for key, value in data.items() if key in keep}


def _finite_sum(values: Iterable[Any]) -> float | None:
    recorded = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return math.fsum(recorded) if recorded else None


def _training_config(old: Mapping[str, Any], dropped: list[str]) -> dict[str, Any]:
    workload_keys = _fields(Workload) - {"unknown"}
    workload = {key: old.get(key) for key in workload_keys}
    workload["unknown"] = {key: NOT_RECORDED for key, value in workload.items() if value is None}
    config = _pick(old, TrainingConfig, "training_config", dropped, exclude=workload_keys)
    config["workload"] = workload
    return config


def _disagreement(old: Mapping[str, Any]) -> dict[str, Any]:
    new = {key: old[key] for key in ("metric", "ours", "theirs", "relative_gap", "tolerance", "flagged")}
    new["other_conventions"] = [_disagreement(d) for d in old.get("other_convention") or []]
    return new


def _framework_reported(old: Mapping[str, Any] | None, dropped: list[str]) -> dict[str, Any] | None:
    if not old:
        return None
    where = "performance_metrics.framework_reported"
    new = _pick(old, FrameworkReported, where, dropped)
    if "disagreement" in old:  # log extraction's shape
        new["disagreements"] = [_disagreement(d) for d in old.get("disagreement") or []]
        new["running_average"] = dict(old.get("framework_running_avg") or {})
    else:  # the Lightning callback's shape: one step-time comparison
        step = old.get("step_time")
        new["disagreements"] = [_disagreement(step)] if step else []
        if old.get("metric"):
            new["source"] = f"{old.get('source') or 'framework'} (logged as {old['metric']!r})"
    new.setdefault("source", "framework's own figures")
    new["flagged"] = any(d["flagged"] for d in new["disagreements"])
    return new


def _performance(old: Mapping[str, Any] | None, step_times: list[Any], dropped: list[str]) -> dict[str, Any] | None:
    if old is None:
        return None
    new = _pick(old, PerformanceMetrics, "performance_metrics", dropped, exclude=("framework_reported",))
    if new.get("step_time_seconds") is not None:
        new["step_time_seconds"] = _pick(new["step_time_seconds"], StepStats, "performance_metrics.step_time_seconds",
                                         dropped)
    new.setdefault("total_time_seconds", _finite_sum(step_times))
    for key in ("steps_per_second", "peak_tflops"):
        new.setdefault(key, None)
    new.setdefault("peak_precision", "bf16")
    new.setdefault("throughput_basis", "GBS * SL / median step time over measured steps")
    if new.get("mfu") is None and not new.get("mfu_reason"):
        new["mfu_reason"] = f"MFU {NOT_RECORDED}"
    new["framework_reported"] = _framework_reported(old.get("framework_reported"), dropped)
    return new


def _memory(old: Mapping[str, Any] | None, dropped: list[str]) -> dict[str, Any] | None:
    if old is None:
        return None
    new = _pick(old, MemoryMetrics, "memory_metrics", dropped)
    used = old.get("device_used_gb")
    if isinstance(used, Mapping):
        new["device_used_peak_gb"] = used.get("peak")
        new["device_used_mean_measured_gb"] = used.get("mean_measured")
    if new.get("total_memory_gb") is None and old.get("device_total_gb_logged") is not None:
        new["total_memory_gb"] = old["device_total_gb_logged"]
    if new.get("peak_allocated_gb") is None and new.get("device_used_peak_gb") is None and not new.get("reason"):
        new["reason"] = f"memory {NOT_RECORDED}"
    return new


def _energy_source(old: Mapping[str, Any]) -> str:
    method = str(old.get("method") or "")
    if method.startswith("Megatron --log-energy"):
        return "log"
    return "power_sampler" if old.get("samples") else "none"


def _power(old: Mapping[str, Any] | None, dropped: list[str]) -> dict[str, Any] | None:
    if old is None:
        return None
    new = _pick(old, PowerMetrics, "power_metrics", dropped)
    new["energy_source"] = _energy_source(old)
    if (new.get("energy_j") is None or new.get("tokens_per_kwh") is None) and not new.get("reason"):
        new["reason"] = f"energy or tokens per kWh {NOT_RECORDED}"
    return new


def _hashed(old: Mapping[str, Any] | None, where: str, dropped: list[str]) -> dict[str, Any]:
    new = _pick(old, HashedFiles, where, dropped)
    if old:
        if new.get("path") is None and old.get("prefix") is not None:
            new["path"] = old["prefix"]
        if new.get("bytes") is None and old.get("bin_bytes") is not None:
            new["bytes"] = old["bin_bytes"]
    return new


def _fingerprint(old: Mapping[str, Any] | None, dropped: list[str]) -> dict[str, Any] | None:
    if old is None:
        return None
    new = _pick(old, Fingerprint, "fingerprint", dropped, exclude=("data", "tokenizer", "code"))
    new["data"] = _hashed(old.get("data"), "fingerprint.data", dropped)
    new["tokenizer"] = _hashed(old.get("tokenizer"), "fingerprint.tokenizer", dropped)
    new["code"] = _pick(old.get("code"), CodeRevision, "fingerprint.code", dropped)
    return new


def _environment(old: Mapping[str, Any] | None, dropped: list[str]) -> dict[str, Any]:
    new = _pick(old, Environment, "environment", dropped, exclude=("image",))
    new["image"] = _pick((old or {}).get("image"), ImageInfo, "environment.image", dropped)
    return new


def _source(old: Mapping[str, Any], dropped: list[str]) -> dict[str, Any]:
    new = _pick(old, Source, "source", dropped, exclude=("problems",))
    new["problems"] = [_pick(p, Problem, "source.problems", dropped) for p in old.get("problems") or []]
    if old.get("primus_experiment"):
        new["generated_files"] = [*new.get("generated_files", []), str(old["primus_experiment"])]
    return new


def migrate(old: Mapping[str, Any]) -> dict[str, Any]:
    """The version-2 form of a version-1 result dict (validated by the caller)."""
    if old.get("schema_version") != 1:
        raise ValueError(f"schema_version is {old.get('schema_version')!r}, not 1")
    dropped: list[str] = []
    blocks = {"gpu_info", "environment", "training_config", "model_shape", "fingerprint", "performance_metrics",
              "memory_metrics", "power_metrics", "source", "profiling", "effective_settings", "schema_version"}
    new = _pick(old, Result, "result", dropped, exclude=blocks)
    step_times = list(old.get("step_times") or [])
    new.update(
        schema_version=2,
        gpu_info=_pick(old.get("gpu_info"), GpuInfo, "gpu_info", dropped),
        environment=_environment(old.get("environment"), dropped),
        training_config=_training_config(old.get("training_config") or {}, dropped),
        model_shape=_pick(old.get("model_shape"), ModelShapeBlock, "model_shape", dropped),
        fingerprint=_fingerprint(old.get("fingerprint"), dropped),
        performance_metrics=_performance(old.get("performance_metrics"), step_times, dropped),
        memory_metrics=_memory(old.get("memory_metrics"), dropped),
        power_metrics=_power(old.get("power_metrics"), dropped),
        source=_source(old.get("source") or {}, dropped),
    )
    if old.get("profiling") is not None:
        new["profiling"] = _pick(old["profiling"], Profiling, "profiling", dropped)
    if old.get("effective_settings") is not None:
        new["effective_settings"] = _pick(old["effective_settings"], EffectiveSettings, "effective_settings", dropped)
    note = MIGRATED_NOTE + (f"; keys without a place in version 2 were left out: {', '.join(dropped)}"
                            if dropped else "")
    new["warnings"] = [*(old.get("warnings") or []), note]
    return new
