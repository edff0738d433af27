"""Board power during the measured steps: average watts, energy, tokens per kWh.

A :class:`PowerSampler` runs a daemon thread that reads the board power of one GPU
at ``interval_s`` (default 0.2 s, i.e. 5 Hz; the issue asks for at least 1 Hz)
between :meth:`~PowerSampler.start` and :meth:`~PowerSampler.stop`, which the
trainer calls around the measured (post-warm-up) steps only, so warm-up and
start-up do not dilute the figures. A sample is also taken synchronously at
start and at stop, so the trapezoid integral covers exactly that window:
``energy = sum((P_i + P_{i+1}) / 2 * (t_{i+1} - t_i))``.

Readers: ``nvidia-ml-py`` (``nvmlDeviceGetPowerUsage``, milliwatts) on ``nvd`` and
``amdsmi`` (``amdsmi_get_power_info``, watts) on ``amd``. Multi-GPU choice: every
rank samples *its own* device and rank 0 gathers the per-GPU figures
(:func:`power_metrics` takes one :class:`DeviceEnergy` per GPU), so the total
energy is measured on every GPU rather than rank 0's number multiplied by the
world size. When only some GPUs were measured (an interrupted run skips the
gather), the per-GPU figures are kept but the totals are null with the reason.

On ``cpu``, or when the library or the device is unavailable, every value is
``null`` with a ``reason``: CPU package power is not a GPU board power and is not
substituted for it.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

JOULES_PER_KWH = 3.6e6
DEFAULT_INTERVAL_S = 0.2


class PowerReader(Protocol):
    """One GPU's instantaneous board power."""

    method: str

    def read_watts(self) -> float: ...


@dataclass
class NvmlReader:
    """NVIDIA board power through NVML (``nvmlDeviceGetPowerUsage`` returns milliwatts)."""

    nvml: Any
    handle: Any
    method: str = "nvml nvmlDeviceGetPowerUsage"

    def read_watts(self) -> float:
        return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0


@dataclass
class AmdSmiReader:
    """AMD socket power through amdsmi; the populated field differs by GPU generation and ROCm version."""

    amdsmi: Any
    handle: Any
    method: str = "amdsmi amdsmi_get_power_info"
    FIELDS: tuple[str, ...] = ("socket_power", "current_socket_power", "average_socket_power")

    def read_watts(self) -> float:
        info = self.amdsmi.amdsmi_get_power_info(self.handle)
        for name in self.FIELDS:
            value = info.get(name)
            # Unsupported fields read "N/A" or UINT32_MAX (amdsmi's documented sentinel).
            if isinstance(value, (int, float)) and 0 < value < 0xFFFFFFFF:
                return float(value)
        raise RuntimeError(f"amdsmi_get_power_info has no usable power field: {sorted(info)}")


def _visible_index(device_index: int, variables: tuple[str, ...]) -> int:
    """Physical index behind a logical device index when ``*_VISIBLE_DEVICES`` lists plain numbers."""
    for name in variables:
        listed = [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]
        if listed and all(item.isdigit() for item in listed) and device_index < len(listed):
            return int(listed[device_index])
    return device_index


def _nvml_reader(device_index: int, nvml: Any | None = None) -> NvmlReader:
    if nvml is None:
        import pynvml as nvml  # nvidia-ml-py
    nvml.nvmlInit()
    handle = None
    try:  # the UUID survives any CUDA_VISIBLE_DEVICES reordering
        import torch

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # no torch device UUID, or NVML refuses it: fall back to the index
        handle = None
    if handle is None:
        handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index(device_index, ("CUDA_VISIBLE_DEVICES",)))
    return NvmlReader(nvml, handle)


def _amdsmi_reader(device_index: int, amdsmi: Any | None = None) -> AmdSmiReader:
    if amdsmi is None:
        import amdsmi
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
    opener: Callable[[int, Any], PowerReader] = {"nvd": _nvml_reader, "amd": _amdsmi_reader}.get(platform)  # type: ignore[assignment]
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


@dataclass
class DeviceEnergy:
    """What one GPU's sampler measured over its window."""

    method: str
    samples: int
    duration_s: float
    energy_j: float
    avg_power_w: float | None
    read_errors: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def integrate(samples: list[tuple[float, float]]) -> float:
    """Trapezoid integral of ``(time_s, watts)`` samples, in joules."""
    return sum((p0 + p1) / 2.0 * (t1 - t0) for (t0, p0), (t1, p1) in itertools.pairwise(samples))


@dataclass
class PowerSampler:
    """Background sampler of one GPU's power between :meth:`start` and :meth:`stop`."""

    reader: PowerReader
    interval_s: float = DEFAULT_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    samples: list[tuple[float, float]] = field(default_factory=list)
    read_errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        if not 0 < self.interval_s <= 1.0:
            raise ValueError(f"interval_s={self.interval_s}: must be in (0, 1] to sample at >= 1 Hz")

    def _sample(self) -> None:
        try:
            watts = self.reader.read_watts()
        except Exception:  # a transient driver error loses one sample, not the run
            self.read_errors += 1
            return
        self.samples.append((self.clock(), watts))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self.running:
            return
        self.samples.clear()
        self._stop.clear()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="tprimat-power", daemon=True)
        self._thread.start()

    def stop(self) -> DeviceEnergy | None:
        """Stop sampling and summarise; None if it never started or no sample could be read."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()
        if len(self.samples) < 2:
            return None
        duration = self.samples[-1][0] - self.samples[0][0]
        energy = integrate(self.samples)
        return DeviceEnergy(
            method=self.reader.method, samples=len(self.samples), duration_s=duration, energy_j=energy,
            avg_power_w=energy / duration if duration > 0 else None, read_errors=self.read_errors,
        )


def null_power_metrics(reason: str) -> dict[str, Any]:
    """Every figure null, with why (cpu, missing library, no samples)."""
    return {
        "avg_power_w_per_gpu": None, "per_gpu_avg_power_w": None, "energy_j": None, "energy_kwh": None,
        "tokens": None, "tokens_per_kwh": None, "duration_s": None, "samples": None,
        "gpus_measured": 0, "gpus_total": None, "method": None, "reason": reason,
    }


def power_metrics(
    devices: list[DeviceEnergy | dict[str, Any] | None], *, gpus_total: int, tokens: int | None,
    gathered_note: str = "each rank samples its own GPU; rank 0 gathers",
) -> dict[str, Any]:
    """The result's ``power_metrics`` from one entry per GPU (None where that GPU was not measured).

    ``tokens`` is the number of tokens all GPUs processed during the sampled window
    (measured steps * GBS * SL). Totals (energy, tokens per kWh) are given only when
    every GPU of the job was measured; a partial set keeps per-GPU figures and says so.
    """
    measured = [DeviceEnergy(**d) if isinstance(d, dict) else d for d in devices if d is not None]
    if not measured:
        return {**null_power_metrics("no power samples were collected"), "gpus_total": gpus_total}
    per_gpu = [d.avg_power_w for d in measured]
    known = [p for p in per_gpu if p is not None]
    out: dict[str, Any] = {
        "avg_power_w_per_gpu": sum(known) / len(known) if known else None,
        "per_gpu_avg_power_w": per_gpu,
        "energy_j": None, "energy_kwh": None, "tokens": tokens, "tokens_per_kwh": None,
        "duration_s": max(d.duration_s for d in measured),
        "samples": sum(d.samples for d in measured),
        "sample_rate_hz": min(d.samples / d.duration_s for d in measured if d.duration_s > 0)
        if any(d.duration_s > 0 for d in measured) else None,
        "read_errors": sum(d.read_errors for d in measured),
        "gpus_measured": len(measured), "gpus_total": gpus_total,
        "method": f"{measured[0].method}, trapezoid over the measured steps; {gathered_note}",
        "reason": None,
    }
    if len(measured) < gpus_total:
        out["reason"] = (f"only {len(measured)} of {gpus_total} GPUs measured: energy totals and tokens per kWh "
                         "not computed")
        return out
    energy = sum(d.energy_j for d in measured)
    out["energy_j"] = energy
    out["energy_kwh"] = energy / JOULES_PER_KWH
    if tokens is not None and energy > 0:
        out["tokens_per_kwh"] = tokens / out["energy_kwh"]
    elif tokens is None:
        out["reason"] = "token count unknown: tokens per kWh not computed"
    return out


@dataclass
class MeasuredWindow:
    """Power over the measured steps of one run, as an in-process trainer uses it.

    ``start()`` before the first post-warm-up step, ``stop(steps_done, gather)`` after the
    last step on every rank (``gather`` collects one entry per GPU, e.g. through
    ``torch.distributed.all_gather_object``), ``metrics(steps_done)`` on rank 0 for the
    result. If the run ends abnormally, ``metrics`` stops the local sampler itself and
    reports this GPU only, because a collective with possibly dead peers could hang.
    """

    sampler: PowerSampler | None
    reason: str | None
    gpus_total: int
    tokens_per_step: int
    warmup_steps: int
    devices: list[DeviceEnergy | dict[str, Any] | None] | None = None
    steps_at_stop: int | None = None
    note: str = "each rank samples its own GPU; rank 0 gathers"

    def start(self) -> None:
        if self.sampler is not None:
            self.sampler.start()

    def stop(self, steps_done: int, gather: Callable[[Any], list[Any]] | None = None) -> None:
        if self.sampler is None or not self.sampler.running:
            return
        local = self.sampler.stop()
        self.steps_at_stop = steps_done
        self.devices = gather(local.as_dict() if local else None) if gather else [local]

    def metrics(self, steps_done: int) -> dict[str, Any]:
        if self.sampler is None:
            return {**null_power_metrics(self.reason or "no power reader"), "gpus_total": self.gpus_total}
        if self.sampler.running:
            self.stop(steps_done)
            self.note = "run ended early: only this rank's GPU (not gathered)"
        sampled_steps = (self.steps_at_stop or 0) - self.warmup_steps
        if self.devices is None or sampled_steps <= 0:
            return {**null_power_metrics("no measured (post-warm-up) step ran, so no power was sampled"),
                    "gpus_total": self.gpus_total}
        return power_metrics(self.devices, gpus_total=self.gpus_total,
                             tokens=sampled_steps * self.tokens_per_step, gathered_note=self.note)
