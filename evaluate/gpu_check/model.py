"""The GPU check's record (``gpu_check.json``): one row per framework, the prescreen, the verdict.

Built by ``evaluate/gpu_check/check.py`` from the check's results, rendered by ``evaluate/gpu_check/render.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from utils.machine.prescreen_record import Prescreen

Verdict = Literal["ready", "degraded", "broken"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Row(Record):
    """One framework's line; every ``None`` figure has its reason in ``missing``."""

    framework: str
    name: str
    status: str
    implementation: str | None = None  # Megatron's transformer_impl as resolved (mega, prim): MEGATRON_IMPL
    error: str | None = None
    result_file: str | None = None
    tokens_per_second: float | None = None
    mfu_datasheet: float | None = None
    mfu_measured_peak: float | None = None
    peak_memory_gb: float | None = None
    memory_estimate_gb: float | None = None
    energy_kwh: float | None = None
    tokens_per_kwh: float | None = None
    avg_power_w_per_gpu: float | None = None
    first_losses: list[float | None] = []
    loss_gap: float | None = None
    step_time_s: float | None = None
    framework_step_time_s: float | None = None
    framework_tflops_per_gpu: float | None = None
    framework_gap: float | None = None  # largest gap, ours vs the framework's (utils/measure/metrics.py)
    framework_gap_metric: str | None = None
    framework_flagged: bool = False
    missing: dict[str, str] = {}


class GpuCheck(Record):
    """The check's record (``gpu_check.json``): prescreen, rows, what was skipped, the verdict."""

    platform: str
    model: str
    workload: str
    prescreen: Prescreen | None
    prescreen_reason: str | None = None
    loss_reference: str | None = None
    rows: list[Row]
    skipped: list[str] = []
    degraded: list[str] = []
    broken: list[str] = []
    verdict: Verdict
    verdict_line: str

