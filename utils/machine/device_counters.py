"""A GPU's power and energy counters through NVML or amdsmi: the readers and the one way to open them.

The openers map a torch device (or a visible index, for a process without a GPU runtime) to its handle, for the
meters of ``utils/measure/`` and the facts of ``utils/machine/device_facts.py``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class PowerReader(Protocol):
    """One GPU's instantaneous board power (and, where the device has one, its energy counter)."""

    method: str

    def read_watts(self) -> float: ...


@dataclass
class NvmlReader:
    """NVIDIA board power (milliwatts) and total energy since the driver loaded (millijoules) through NVML."""

    nvml: Any
    handle: Any
    method: str = "nvml nvmlDeviceGetPowerUsage"
    counter_method: str = "nvml nvmlDeviceGetTotalEnergyConsumption"

    def read_watts(self) -> float:
        return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0

    def read_joules(self) -> float:
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0

    @property
    def counter_modulus_j(self) -> float:
        return 2.0**64 / 1000.0  # an unsigned long long of millijoules


@dataclass
class AmdSmiReader:
    """AMD socket power through amdsmi; the populated field differs by GPU generation and ROCm version."""

    amdsmi: Any
    handle: Any
    method: str = "amdsmi amdsmi_get_power_info"
    counter_method: str = "amdsmi amdsmi_get_energy_count"
    FIELDS: tuple[str, ...] = ("socket_power", "current_socket_power", "average_socket_power")

    def read_watts(self) -> float:
        info = self.amdsmi.amdsmi_get_power_info(self.handle)
        for name in self.FIELDS:
            value = info.get(name)
            # Unsupported fields read "N/A" or UINT32_MAX (amdsmi's documented sentinel).
            if isinstance(value, (int, float)) and 0 < value < 0xFFFFFFFF:
                return float(value)
        raise RuntimeError(f"amdsmi_get_power_info has no usable power field: {sorted(info)}")

    def read_joules(self) -> float:
        # The accumulator is "energy_accumulator" (older amdsmi: "power"); ticks x resolution = microjoules.
        info = self.amdsmi.amdsmi_get_energy_count(self.handle)
        ticks = info.get("energy_accumulator", info.get("power"))
        resolution = info.get("counter_resolution")
        if not isinstance(ticks, (int, float)) or not isinstance(resolution, (int, float)) or resolution <= 0:
            raise RuntimeError(f"amdsmi_get_energy_count has no usable accumulator: {sorted(info)}")
        self.resolution_uj = float(resolution)
        return float(ticks) * float(resolution) / 1e6

    resolution_uj: float | None = None

    @property
    def counter_modulus_j(self) -> float | None:
        # a uint64 accumulator of ticks; known once a read gave the resolution
        return 2.0**64 * self.resolution_uj / 1e6 if self.resolution_uj else None


def _visible_index(device_index: int, variables: tuple[str, ...]) -> int:
    """Physical index behind a logical device index when ``*_VISIBLE_DEVICES`` lists plain numbers."""
    for name in variables:
        listed = [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]
        if listed and all(item.isdigit() for item in listed) and device_index < len(listed):
            return int(listed[device_index])
    return device_index


def nvml_reader(device_index: int, nvml: Any | None = None, by_uuid: bool = True) -> NvmlReader:
    """NVML opened on ``device_index`` (torch's numbering): the one mapping of a torch device to its NVML handle."""
    if nvml is None:
        import pynvml as nvml  # local: nvidia-ml-py exists only on NVIDIA hosts
    nvml.nvmlInit()
    handle = None
    try:  # the UUID survives any CUDA_VISIBLE_DEVICES reordering (a launcher passes by_uuid=False: no CUDA there)
        if not by_uuid:
            raise LookupError("by index")
        import torch  # local: importing torch takes ~4.6 s on the 2-core host (-X importtime)

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # no torch device UUID, or NVML refuses it: fall back to the index
        handle = None
    if handle is None:
        handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index(device_index, ("CUDA_VISIBLE_DEVICES",)))
    return NvmlReader(nvml, handle)


def amdsmi_reader(device_index: int, amdsmi: Any | None = None, by_uuid: bool = True) -> AmdSmiReader:
    """amdsmi opened on visible device ``device_index``: the one mapping of a visible device to its amdsmi handle."""
    if amdsmi is None:
        import amdsmi  # local: exists only on AMD hosts
    amdsmi.amdsmi_init()
    handles = amdsmi.amdsmi_get_processor_handles()
    physical = _visible_index(device_index, ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"))
    if physical >= len(handles):
        raise RuntimeError(f"amdsmi lists {len(handles)} GPU(s); device {physical} is not among them")
    return AmdSmiReader(amdsmi, handles[physical])


def open_reader(platform: str, device_index: int, library: Any | None = None) -> tuple[PowerReader | None, str | None]:
    """A reader for ``device_index`` on ``platform``, or ``(None, reason)``. ``library`` lets tests inject a fake."""
    if platform == "cpu":
        return None, "platform cpu: no GPU board power sensor (CPU package power is not measured)"
    opener: Callable[[int, Any], PowerReader] = {"nvd": nvml_reader, "amd": amdsmi_reader}.get(platform)  # type: ignore[assignment]
    if opener is None:
        return None, f"platform {platform!r}: no power reader"
    name = "nvidia-ml-py (pynvml)" if platform == "nvd" else "amdsmi"
    try:
        reader = opener(device_index, library)
        reader.read_watts()  # fail now, not silently in the thread
    except ImportError as exc:
        return None, f"{name} is not installed: {exc}"
    except Exception as exc:
        return None, f"{name} cannot read power of device {device_index}: {type(exc).__name__}: {exc}"
    return reader, None


def open_counter(platform: str, device_index: int, library: Any | None = None) -> tuple[Any | None, str | None]:
    """The energy counter of visible GPU ``device_index`` opened by index (no GPU runtime), or ``(None, reason)``. For a
    process that must not initialise CUDA/HIP itself: the launcher, around its child."""
    if platform == "cpu":
        return None, "platform cpu: no GPU energy counter (CPU package energy is not measured)"
    opener: Callable[..., Any] | None = {"nvd": nvml_reader, "amd": amdsmi_reader}.get(platform)
    if opener is None:
        return None, f"platform {platform!r}: no energy counter reader"
    name = "nvidia-ml-py (pynvml)" if platform == "nvd" else "amdsmi"
    try:
        counter = opener(device_index, library, by_uuid=False)
        value = float(counter.read_joules())
    except ImportError as exc:
        return None, f"{name} is not installed: {exc}"
    except Exception as exc:
        return None, f"{name} cannot read the energy counter of device {device_index}: {type(exc).__name__}: {exc}"
    if not math.isfinite(value):
        return None, f"{name} energy counter of device {device_index} read {value}"
    return counter, None
