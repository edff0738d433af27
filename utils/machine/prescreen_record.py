"""The prescreen's typed record (``<check dir>/prescreen.json``): what ``utils/machine/prescreen.py`` measured on one
device, as ``evaluate/gpu_check/`` reads it back.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from utils.machine.device_facts import Fact


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class GemmPoint(Model):
    """One size of the sweep: ``iterations`` multiplies of bf16 ``n x n`` matrices took ``seconds``."""

    n: int = Field(ge=1)
    iterations: int = Field(ge=1)
    seconds: float = Field(gt=0)
    tflops: float = Field(ge=0)


class GemmSweep(Model):
    points: list[GemmPoint]
    measured_peak_tflops: float | None
    best_n: int | None
    datasheet_tflops: float | None
    datasheet_source: str | None
    fraction_of_datasheet: float | None
    reason: str | None = None


class CopyBandwidth(Model):
    bytes: int = Field(ge=1)
    iterations: int = Field(ge=1)
    seconds: float = Field(gt=0)
    bytes_moved_per_copy: int = Field(ge=1)
    measured_tbs: float = Field(ge=0)
    datasheet_tbs: float | None
    datasheet_source: str | None
    fraction_of_datasheet: float | None
    reason: str | None = None


class ClockRecord(Model):
    """The device's SM clock and clock-event reasons while the best GEMM size ran (idle samples left out);
    ``at_max_clock_tflops``: the measured peak scaled to the maximum SM clock (measured x max / sustained)."""

    library: str | None
    samples: int = Field(ge=0)
    during_n: int | None
    sm_clock_sustained_mhz: float | None
    sm_clock_max_mhz: float | None
    reasons: dict[str, float] = Field(default_factory=dict)  # reason -> share of the samples it was active in
    power_limit_w: float | None
    at_max_clock_tflops: float | None
    at_max_clock_fraction: float | None
    reason: str | None = None


class Prescreen(Model):
    """What ``python -m utils.machine.prescreen`` measured on one device (``<check dir>/prescreen.json``)."""

    platform: str
    device_index: int = 0
    device_name: str
    measured_at: str
    duration_s: float = Field(ge=0)
    gemm: GemmSweep
    copy_bandwidth: CopyBandwidth
    facts: dict[str, Fact]
    warnings: list[str] = Field(default_factory=list)
    clocks: ClockRecord | None = None
    power_capped_w: float | None = None  # a GEMM peak under WARN_FRACTION explained by the power cap (not a warning)
    notes: list[str] = Field(default_factory=list)
