"""A GPU's facts (model, driver, runtime, memory, power limit, clocks, ECC) through NVML or amdsmi.

Each fact is read on its own: one the device cannot give is ``None`` with what the library said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from utils.machine.device_counters import amdsmi_reader, nvml_reader

# The facts both libraries are asked for (NVML adds driver_cuda_version); ``runtime`` comes from torch.
FACT_NAMES = ("model", "driver", "memory_total_gib", "power_limit_w", "sm_clock_mhz", "sm_clock_max_mhz",
              "memory_clock_mhz", "memory_clock_max_mhz", "ecc_enabled", "ecc_uncorrected_volatile", "temperature_c")


class Fact(BaseModel):
    """One device fact: its value, or ``None`` and why it could not be read."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    value: str | int | float | bool | None = None
    reason: str | None = None


def read_fact(read: Callable[[], Any], library: str) -> Fact:
    """One fact, or ``None`` with what the library said (an unsupported query is not an error of the check)."""
    try:
        value = read()
    except Exception as exc:  # NVMLError_NotSupported, AmdSmiException ...: the reason is the message
        return Fact(reason=f"{library}: {type(exc).__name__}: {exc}".strip())
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if value is None or (isinstance(value, str) and value.strip() in ("", "N/A")):
        return Fact(reason=f"{library} returned no value")
    return Fact(value=value)


def nvml_facts(nvml: Any, handle: Any) -> dict[str, Fact]:
    """The facts NVML gives for ``handle`` (units: MHz, W, GiB)."""
    lib = "nvidia-ml-py"
    readers: dict[str, Callable[[], Any]] = {
        "model": lambda: nvml.nvmlDeviceGetName(handle),
        "driver": lambda: nvml.nvmlSystemGetDriverVersion(),
        "driver_cuda_version": lambda: _cuda_version(nvml.nvmlSystemGetCudaDriverVersion_v2()),
        "memory_total_gib": lambda: round(nvml.nvmlDeviceGetMemoryInfo(handle).total / 1024**3, 2),
        "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "sm_clock_max_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        "memory_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "memory_clock_max_mhz": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "ecc_enabled": lambda: bool(nvml.nvmlDeviceGetEccMode(handle)[0]),
        "ecc_uncorrected_volatile": lambda: nvml.nvmlDeviceGetTotalEccErrors(
            handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
        "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
    }
    return {name: read_fact(read, lib) for name, read in readers.items()}


def _cuda_version(code: int) -> str:
    """NVML's 12080 -> ``12.8``."""
    return f"{code // 1000}.{code % 1000 // 10}"


def amdsmi_facts(amdsmi: Any, handle: Any) -> dict[str, Fact]:
    """The facts amdsmi gives for ``handle`` (power cap in microwatts, clocks in MHz)."""
    lib = "amdsmi"
    readers: dict[str, Callable[[], Any]] = {
        "model": lambda: amdsmi.amdsmi_get_gpu_asic_info(handle)["market_name"],
        "driver": lambda: amdsmi.amdsmi_get_gpu_driver_info(handle)["driver_version"],
        "memory_total_gib": lambda: round(amdsmi.amdsmi_get_gpu_memory_total(
            handle, amdsmi.AmdSmiMemoryType.VRAM) / 1024**3, 2),
        "power_limit_w": lambda: amdsmi.amdsmi_get_power_cap_info(handle)["power_cap"] / 1e6,
        "sm_clock_mhz": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.GFX)["clk"],
        "sm_clock_max_mhz": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.GFX)["max_clk"],
        "memory_clock_mhz": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.MEM)["clk"],
        "memory_clock_max_mhz": lambda: amdsmi.amdsmi_get_clock_info(handle, amdsmi.AmdSmiClkType.MEM)["max_clk"],
        "ecc_enabled": lambda: bool(amdsmi.amdsmi_get_gpu_ecc_enabled(handle)),
        "ecc_uncorrected_volatile": lambda: amdsmi.amdsmi_get_gpu_total_ecc_count(handle)["uncorrectable_count"],
        "temperature_c": lambda: amdsmi.amdsmi_get_temp_metric(
            handle, amdsmi.AmdSmiTemperatureType.HOTSPOT, amdsmi.AmdSmiTemperatureMetric.CURRENT),
    }
    return {name: read_fact(read, lib) for name, read in readers.items()}


def device_facts(platform: str, device_index: int = 0, library: Any | None = None) -> dict[str, Fact]:
    """The device's facts through NVML or amdsmi, plus the runtime torch was built for (every fact ``None`` with
    the reason without the library)."""
    name = "nvidia-ml-py (pynvml)" if platform == "nvd" else "amdsmi"
    try:
        if platform == "nvd":
            reader = nvml_reader(device_index, library)
            facts = nvml_facts(reader.nvml, reader.handle)
        else:
            reader = amdsmi_reader(device_index, library)
            facts = amdsmi_facts(reader.amdsmi, reader.handle)
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound ...
        reason = f"{name} cannot open device {device_index}: {type(exc).__name__}: {exc}"
        facts = {key: Fact(reason=reason) for key in FACT_NAMES}
    facts["runtime"] = _runtime()
    return facts


def _runtime() -> Fact:
    try:
        import torch  # local: importing torch takes ~4.6 s on the 2-core host (-X importtime)
    except ImportError as exc:
        return Fact(reason=f"torch is not installed: {exc}")
    hip = getattr(torch.version, "hip", None)
    cuda = getattr(torch.version, "cuda", None)
    if hip:
        return Fact(value=f"ROCm {hip} (torch {torch.__version__})")
    if cuda:
        return Fact(value=f"CUDA {cuda} (torch {torch.__version__})")
    return Fact(reason=f"torch {torch.__version__} is a cpu build")


# ---------------------------------------------------------------------------
# clocks during a measurement (the prescreen's GEMM sweep)

# NVML's clock-event reason bits (nvml.h ``nvmlClocksEventReason*``, formerly ``nvmlClocksThrottleReason*``; the
# same values in nvidia-ml-py), named as nvidia-smi's ``clocks_event_reasons.*`` fields name them.
NVML_CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clock_setting"),
)
IDLE_REASON = "gpu_idle"


def decode_reasons(mask: int) -> tuple[str, ...]:
    """The names of the reason bits set in ``mask`` (an unknown bit is named by its value)."""
    names = [name for bit, name in NVML_CLOCK_EVENT_REASONS if mask & bit]
    known = sum(bit for bit, _ in NVML_CLOCK_EVENT_REASONS)  # distinct bits: their sum is their union
    if mask & ~known:
        names.append(f"unknown_0x{mask & ~known:x}")
    return tuple(names)


@dataclass(frozen=True)
class ClockSample:
    """One reading while the device works: its SM (GFX) clock and the reasons its clocks are held down now
    (``reasons`` None: the library gives none, ``why`` says so)."""

    sm_mhz: float | None
    reasons: tuple[str, ...] | None
    why: str | None = None


class ClockReader(Protocol):
    """What the prescreen samples during its sweep (tests: a fake one)."""

    library: str

    def read(self) -> ClockSample: ...


@dataclass
class _OnHandle:
    """A device library's module and one device's handle in it."""

    lib: Any
    handle: Any


class NvmlClocks(_OnHandle):
    """SM clock and clock-event reasons through NVML (the handle of ``utils/machine/device_counters.py``'s opener)."""

    library = "nvidia-ml-py"

    def read(self) -> ClockSample:
        nvml = self.lib
        sm = read_fact(lambda: nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM), self.library)
        # nvidia-ml-py 12.535 renamed the call; the older name stays in older releases.
        call = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        if call is None:
            return ClockSample(sm.value, None, f"{self.library} has no nvmlDeviceGetCurrentClocksEventReasons")
        mask = read_fact(lambda: call(self.handle), self.library)
        if mask.value is None:
            return ClockSample(sm.value, None, mask.reason)
        return ClockSample(sm.value, decode_reasons(int(mask.value)))


class AmdsmiClocks(_OnHandle):
    """GFX clock through amdsmi; the reasons are not read (amdsmi's throttle-status bits are ASIC-specific)."""

    library = "amdsmi"

    def read(self) -> ClockSample:
        amdsmi = self.lib
        sm = read_fact(lambda: amdsmi.amdsmi_get_clock_info(self.handle, amdsmi.AmdSmiClkType.GFX)["clk"], self.library)
        return ClockSample(sm.value, None, "amdsmi: clock-event reasons are not decoded by tprimat (its "
                                           "throttle-status bits differ by ASIC)")


def clock_reader(platform: str, device_index: int = 0, library: Any | None = None) -> tuple[ClockReader | None, str]:
    """(reader, its library) or (None, why not) for the device the prescreen measures."""
    try:
        if platform == "nvd":
            reader = nvml_reader(device_index, library)
            return NvmlClocks(reader.nvml, reader.handle), "nvidia-ml-py"
        reader = amdsmi_reader(device_index, library)
        return AmdsmiClocks(reader.amdsmi, reader.handle), "amdsmi"
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound ...
        return None, f"cannot read the clocks of device {device_index}: {type(exc).__name__}: {exc}"
