"""Stand-ins for the GPU side: the NVML and amdsmi Python modules (the calls utils/machine/device_counters.py makes, in
their units) and a device of chosen speed for the prescreen (utils/machine/prescreen.py).

The fake device answers each timed operation with the time a device of a given speed would take
(``work / rate``), so the expected TFLOP/s and TB/s are the rates the test chose; nothing is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

H100 = "NVIDIA H100 80GB HBM3"


@dataclass
class FakeDevice:
    """A device whose GEMM runs at ``tflops[n]`` and whose copy moves ``tbs`` TB/s; records every call."""

    name: str
    tflops: dict[int, float]
    tbs: float
    calls: list[tuple[str, int, int]] = field(default_factory=list)

    def gemm_seconds(self, n: int, iterations: int) -> float:
        self.calls.append(("gemm", n, iterations))
        return iterations * 2 * n**3 / (self.tflops[n] * 1e12)

    def copy_seconds(self, nbytes: int, iterations: int) -> float:
        self.calls.append(("copy", nbytes, iterations))
        return iterations * 2 * nbytes / (self.tbs * 1e12)


def h100(peak: float = 798.0, tbs: float = 2.9) -> FakeDevice:
    rates = {2048: 0.55 * peak, 4096: 0.9 * peak, 8192: peak, 16384: 0.97 * peak}
    return FakeDevice(H100, rates, tbs)


class FakeNvml:
    """The pynvml calls of utils.machine.device_counters: power in milliwatts, energy in millijoules (NVML's units).

    ``energy_mj=None`` is a device without an energy counter (NVML raises NotSupported before Volta).
    """

    def __init__(self, milliwatts: float = 350_000.0, energy_mj: list[int] | None = None) -> None:
        self.milliwatts = milliwatts
        self.energy = iter(energy_mj) if energy_mj is not None else None
        self.index_asked: int | None = None

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        raise RuntimeError("no such uuid")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.index_asked = index
        return f"gpu{index}"

    def nvmlDeviceGetPowerUsage(self, handle: str) -> float:
        return self.milliwatts

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if self.energy is None:
            raise RuntimeError("NVMLError_NotSupported: Not Supported")
        return next(self.energy)


class FakeAmdSmi:
    """MI300X-style power fields; ``energy_key`` is the accumulator's name (``power`` before ROCm 6.4)."""

    def __init__(self, ticks: list[int] | None = None, energy_key: str = "energy_accumulator") -> None:
        self.ticks = iter(ticks) if ticks is not None else None
        self.energy_key = energy_key

    def amdsmi_init(self) -> None:
        pass

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0", "gpu1"]

    def amdsmi_get_power_info(self, handle: str) -> dict[str, Any]:
        # socket_power unsupported (N/A), current_socket_power populated.
        return {"socket_power": "N/A", "current_socket_power": 612, "average_socket_power": 0xFFFFFFFF}

    def amdsmi_get_energy_count(self, handle: str) -> dict[str, Any]:
        if self.ticks is None:
            raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")
        # ticks x counter_resolution (microjoules per tick) = energy in microjoules
        return {self.energy_key: next(self.ticks), "counter_resolution": 15.3, "timestamp": 0}
