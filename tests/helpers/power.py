"""Stand-ins for the NVML and amdsmi Python modules: the calls utils/measure/power.py makes, in their units."""

from __future__ import annotations

from typing import Any


class FakeNvml:
    """The pynvml calls utils.measure.power makes: power in milliwatts, total energy in millijoules (NVML's units).

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
