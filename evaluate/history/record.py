"""One result as the history stores it: a ``runs`` row, a ``series`` row, and the keys that find it again.

Flat rows, not the result file: a trend reads three figures of 100,000 runs. Every text is escaped so that both
databases store it (PostgreSQL refuses NUL and lone surrogates).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotations: a query or a trend never loads the result model (docs/PERFORMANCE.md)
    from utils.schema.model import Result

# what identifies an imported MLPerf run (utils/schema/mlperf.py Published) in a diff and across rounds
PUBLISHED_FACTS = ("round", "submitter", "system", "system_id", "benchmark", "division", "log", "score_min", "counted")


def text(value: object) -> str | None:
    """``value`` as a string both databases store (NUL and lone surrogates escaped); None stays None."""
    if value is None:
        return None
    shown = str(value)
    if "\x00" in shown:
        shown = shown.replace("\x00", "\\x00")
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:
        shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, ASCII): the same content always gives the same text and hash."""
    return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def _json(value: Any) -> str:
    """JSON text for a column: ASCII (so NUL and lone surrogates are escapes both databases store), no NaN."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def content_hash(result: Result) -> str:
    """SHA-256 of the result as pydantic serialises it: the same result gives the same hash whatever its
    indentation (a free-form block in another key order counts as other content)."""
    try:
        text_form = result.model_dump_json()
    except ValueError:  # a lone surrogate (valid JSON, no UTF-8): the same fields, ASCII-escaped
        text_form = json.dumps(result.model_dump(mode="python"), ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text_form.encode()).hexdigest()


def workload_identity(result: Result) -> dict[str, Any]:
    """What makes two runs the same job: model, proxy depth, profile and every workload key."""
    return {"model": result.model, "model_layers": result.training_config.model_layers, "profile": result.profile,
            "workload": result.training_config.workload.model_dump(mode="json")}


def workload_key(result: Result) -> str:
    return hashlib.sha256(canonical(workload_identity(result)).encode()).hexdigest()


def normalized_time(value: str | None) -> str | None:
    """An ISO time as UTC ``YYYY-MM-DDTHH:MM:SS+00:00`` (sortable as text); None when it is no ISO time."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, ValueError):
        return None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def versions(result: Result) -> dict[str, str]:
    """The versions a trend marks when they change: driver, stack, torch, image, frameworks, libraries."""
    gpu, env = result.gpu_info, result.environment
    found: dict[str, Any] = {
        "driver": gpu.driver_version, f"{gpu.software_stack}": gpu.software_version, "torch": gpu.pytorch_version,
        "image": env.image.tag, "image_digest": env.image.digest,
    }
    for name, value in result.framework_versions.model_dump().items():
        if name != "unknown":
            found[f"framework.{name}"] = value
    for name, value in env.libraries.items():
        found[f"library.{name}"] = value
    if result.published is not None:  # an imported MLPerf run: its round marks a trend (release to release)
        found["mlperf.round"] = result.published.round
    return {key: str(value) for key, value in sorted(found.items()) if value is not None}


def details(result: Result) -> dict[str, Any]:
    """Every fact a diff compares, flat, keyed ``<group>.<name>``."""
    gpu, env = result.gpu_info, result.environment
    facts: dict[str, Any] = {
        "run.platform": result.platform, "run.framework": result.framework, "run.model": result.model,
        "run.profile": result.profile, "run.status": result.status,
        "hardware.device_name": gpu.device_name, "hardware.device_count": gpu.device_count,
        "hardware.total_memory_gb": gpu.total_memory_gb, "hardware.cpu_name": gpu.cpu_name,
        "hardware.hostname": env.hostname, "hardware.peak_tflops_bf16": gpu.peak_tflops.bf16,
        "driver.driver_version": gpu.driver_version, "driver.software_stack": gpu.software_stack,
        "driver.software_version": gpu.software_version,
        "image.tag": env.image.tag, "image.digest": env.image.digest, "image.in_container": env.image.in_container,
        "versions.python": env.python, "versions.os": env.os, "versions.pytorch": gpu.pytorch_version,
    }
    for name, value in result.framework_versions.model_dump().items():
        if name != "unknown":
            facts[f"versions.{name}"] = value
    facts.update({f"library.{k}": v for k, v in env.libraries.items()})
    facts.update({f"env.{k}": v for k, v in env.variables.items()})
    workload = result.training_config.workload.model_dump(mode="json")
    workload.pop("unknown", None)
    facts.update({f"workload.{k}": v for k, v in workload.items()})
    facts["workload.model_layers"] = result.training_config.model_layers
    facts["workload.precision_effective"] = result.training_config.precision_effective
    if result.profile_settings is not None:
        facts["profile.recipe"] = result.profile_settings.recipe
    if result.published is not None:
        facts.update({f"published.{k}": v for k, v in result.published.model_dump().items() if k in PUBLISHED_FACTS})
    if result.effective_settings is not None:
        facts.update({f"settings.{k}": v for k, v in result.effective_settings.settings.items()})
        facts["settings.resolved_by"] = result.effective_settings.resolved_by
    fp = result.fingerprint
    if fp is not None:
        facts.update({"fingerprint.config": fp.config, "fingerprint.model_shape": fp.model_shape,
                      "fingerprint.data": fp.data.hash, "fingerprint.tokenizer": fp.tokenizer.hash,
                      "fingerprint.code_commit": fp.code.commit, "fingerprint.code_dirty": fp.code.dirty})
    return {key: value for key, value in sorted(facts.items()) if value is not None}


def baseline_problem(result: Result) -> str | None:
    """Why this run can never be a gate baseline (None: it can)."""
    if result.status != "ok":
        return f"status {result.status}"
    perf = result.performance_metrics
    if perf is None or _finite(perf.tokens_per_second_per_gpu) is None:
        return "no measured throughput (tokens/s/GPU is null)"
    skip = perf.skipped_steps
    bad = [i for i, v in enumerate(result.loss_values) if i >= skip and (v is None or not math.isfinite(v))]
    if bad:
        return f"loss not finite at {len(bad)} measured step(s) (first: step {result.first_step + bad[0]})"
    return None


@dataclass(frozen=True)
class RunRecord:
    """The rows of one result: ``run`` for ``runs`` (without ``id``/``added_at``), ``series`` (arrays and facts)
    without ``run_id``."""

    run: dict[str, Any]
    series: dict[str, Any]

    @property
    def content_hash(self) -> str:
        return self.run["content_hash"]


def make_record(result: Result, source: str, refused: str | None = None) -> RunRecord:
    """The stored form of ``result``, read from ``source`` (a path, or ``archive.zip:member``); ``refused``: why the
    gate refused it (``utils/result/admit.py``), stored as its status and error."""
    gpu, env, perf = result.gpu_info, result.environment, result.performance_metrics
    power, memory = result.power_metrics, result.memory_metrics
    settings = result.effective_settings.settings if result.effective_settings is not None else {}
    problem = f"refused: {refused}" if refused else baseline_problem(result)
    shape = result.model_shape
    run = {
        "content_hash": content_hash(result), "source": text(source), "status": "refused" if refused else result.status,
        "error": text(refused or result.error), "platform": result.platform, "framework": result.framework,
        "model": result.model,
        "model_label": text(shape.display_name if shape.proxy_of_layers is not None else result.model),
        "profile": result.profile, "run_index": result.run_index,
        "started_at": text(result.started_at), "finished_at": text(result.finished_at),
        "run_time": normalized_time(result.finished_at) or normalized_time(result.started_at),
        "workload_key": workload_key(result),
        # the device a trend and "the last ok run on this device" group by: on cpu, the CPU
        "device_name": text(gpu.device_name or (gpu.cpu_name if gpu.software_stack == "cpu" else None)),
        "device_count": gpu.device_count,
        "software_stack": gpu.software_stack, "software_version": text(gpu.software_version),
        "driver_version": text(gpu.driver_version), "pytorch_version": text(gpu.pytorch_version),
        "cpu_name": text(gpu.cpu_name), "hostname": text(env.hostname), "image_tag": text(env.image.tag),
        "image_digest": text(env.image.digest),
        "samples_digest": text(settings.get("samples_digest")) if settings.get("samples_digest") is not None else None,
        "code_commit": text(result.fingerprint.code.commit) if result.fingerprint is not None else None,
        "tokens_per_second": _finite(perf.tokens_per_second) if perf else None,
        "tokens_per_second_per_gpu": _finite(perf.tokens_per_second_per_gpu) if perf else None,
        "median_step_time": _finite(perf.median_step_time_seconds) if perf else None,
        "mfu": perf.mfu.causal if perf and perf.mfu else None,
        "mfu_full": perf.mfu.full if perf and perf.mfu else None,
        "tflops_per_gpu": perf.tflops_per_gpu.causal if perf and perf.tflops_per_gpu else None,
        "tokens_per_kwh": power.tokens_per_kwh if power else None,
        "energy_j": power.energy_j if power else None,
        "peak_memory_gb": (memory.peak_allocated_gb if memory.peak_allocated_gb is not None
                           else memory.device_used_peak_gb) if memory else None,
        "measured_steps": perf.measured_steps if perf else None,
        "baseline_ok": problem is None, "baseline_reason": problem,
        "versions": _json(versions(result)),
    }
    series = {
        "first_step": result.first_step, "step_interval": result.step_interval,
        "skipped_steps": perf.skipped_steps if perf else 0,
        "step_times": _json(result.step_times), "losses": _json(result.loss_values),
        "details": _json(details(result)),
    }
    return RunRecord(run, series)
