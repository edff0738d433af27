"""Board energy and power during the measured steps: the one producer of ``power_metrics``.

What is measured, best first (``PowerMetrics.energy_source`` says which was used):

* ``energy_counter``: the device's cumulative energy counter, read at the two ends of
  the measured window (the post-warm-up steps), so the energy is exact whatever the
  power did in between: NVML ``nvmlDeviceGetTotalEnergyConsumption`` on ``nvd``,
  amdsmi ``amdsmi_get_energy_count`` on ``amd`` (units in docs/PERFORMANCE.md,
  "Power and energy");
* ``power_sampler``: where no counter can be read, a daemon thread samples board
  power at ``interval_s`` (default 0.2 s, 5 Hz) with one synchronous sample at each
  end, and the energy is the trapezoid integral
  ``sum((P_i + P_{i+1}) / 2 * (t_{i+1} - t_i))``;
* ``log``: Megatron's ``--log-energy`` fields, when only a log is available
  (:func:`log_power_metrics`).

Multi-GPU choice: every rank measures *its own* device and rank 0 gathers one
:class:`DeviceEnergy` per GPU, so the total energy is measured on every GPU rather
than rank 0's number multiplied by the world size. When only some GPUs were measured
(an interrupted run skips the gather), the per-GPU figures are kept but the totals
are null with the reason.

On ``cpu``, or when the library or the device is unavailable, every value is
``null`` with a ``reason``: CPU package power is not a GPU board power and is not
substituted for it.

Why one file over 400 lines: it is the one producer of ``power_metrics`` (counter, sampler,
log), and the three sources must agree on units and on when a total is null.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from utils.schema.measures import PowerMetrics

JOULES_PER_KWH = 3.6e6
DEFAULT_INTERVAL_S = 0.2
EnergySource = Literal["energy_counter", "power_sampler"]


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


def _nvml_reader(device_index: int, nvml: Any | None = None, by_uuid: bool = True) -> NvmlReader:
    if nvml is None:
        import pynvml as nvml  # nvidia-ml-py
    nvml.nvmlInit()
    handle = None
    try:  # the UUID survives any CUDA_VISIBLE_DEVICES reordering (a launcher passes by_uuid=False: no CUDA there)
        if not by_uuid:
            raise LookupError("by index")
        import torch

        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:  # no torch device UUID, or NVML refuses it: fall back to the index
        handle = None
    if handle is None:
        handle = nvml.nvmlDeviceGetHandleByIndex(_visible_index(device_index, ("CUDA_VISIBLE_DEVICES",)))
    return NvmlReader(nvml, handle)


def _amdsmi_reader(device_index: int, amdsmi: Any | None = None, by_uuid: bool = True) -> AmdSmiReader:
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


def open_counter(platform: str, device_index: int, library: Any | None = None) -> tuple[Any | None, str | None]:
    """The energy counter of visible GPU ``device_index`` opened by index (no GPU runtime), or ``(None, reason)``.

    For a process that must not initialise CUDA/HIP itself: the launcher, around its child.
    """
    if platform == "cpu":
        return None, "platform cpu: no GPU energy counter (CPU package energy is not measured)"
    opener: Callable[..., Any] | None = {"nvd": _nvml_reader, "amd": _amdsmi_reader}.get(platform)
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


@dataclass
class DeviceEnergy:
    """What one GPU's meter measured over its window."""

    method: str
    samples: int
    duration_s: float
    energy_j: float
    avg_power_w: float | None
    read_errors: int = 0
    source: EnergySource = "power_sampler"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def integrate(samples: list[tuple[float, float]]) -> float:
    """Trapezoid integral of ``(time_s, watts)`` samples, in joules."""
    return sum((p0 + p1) / 2.0 * (t1 - t0) for (t0, p0), (t1, p1) in itertools.pairwise(samples))


@dataclass(kw_only=True)
class Periodic:
    """A daemon thread that calls :meth:`sample` at :meth:`begin`, every ``interval_s`` after, and at :meth:`end`.

    The power sampler below and the launcher's energy-counter trace (``utils/measure/energy_trace.py``) share
    it: each has its own ``interval_s`` field and says what one sample is, and when it starts and stops.
    """

    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    thread_name: ClassVar[str]  # and each subclass's own ``interval_s`` field (its default, its bounds)

    def sample(self) -> None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._thread is not None

    def begin(self) -> bool:
        """The first sample now, then the thread; False (nothing done) when it is already running."""
        if self.running:
            return False
        self._stop.clear()
        self.sample()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def end(self) -> bool:
        """Stop the thread, then the last sample; False (nothing done) when it was not running."""
        if self._thread is None:
            return False
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample()
        return True


@dataclass
class PowerSampler(Periodic):
    """Background sampler of one GPU's power between :meth:`start` and :meth:`stop` (the fallback meter)."""

    reader: PowerReader
    interval_s: float = DEFAULT_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    samples: list[tuple[float, float]] = field(default_factory=list)
    read_errors: int = 0
    thread_name: ClassVar[str] = "tprimat-power"

    def __post_init__(self) -> None:
        if not 0 < self.interval_s <= 1.0:
            raise ValueError(f"interval_s={self.interval_s}: must be in (0, 1] to sample at >= 1 Hz")

    def sample(self) -> None:
        try:
            watts = self.reader.read_watts()
        except Exception:  # a transient driver error loses one sample, not the run
            self.read_errors += 1
            return
        self.samples.append((self.clock(), watts))

    def start(self) -> None:
        if not self.running:
            self.samples.clear()
            self.begin()

    def stop(self) -> DeviceEnergy | None:
        """Stop sampling and summarise; None if it never started or no sample could be read."""
        if not self.end():
            return None
        if len(self.samples) < 2:
            return None
        duration = self.samples[-1][0] - self.samples[0][0]
        energy = integrate(self.samples)
        return DeviceEnergy(
            method=self.reader.method, samples=len(self.samples), duration_s=duration, energy_j=energy,
            avg_power_w=energy / duration if duration > 0 else None, read_errors=self.read_errors,
        )


@dataclass
class CounterWindow:
    """One GPU's energy counter read at :meth:`start` and :meth:`stop`: energy = the difference."""

    counter: Any  # a reader with read_joules() and counter_method
    clock: Callable[[], float] = time.monotonic
    read_errors: int = 0
    _start: tuple[float, float] | None = None

    @property
    def running(self) -> bool:
        return self._start is not None

    def _read(self) -> tuple[float, float] | None:
        try:
            joules = float(self.counter.read_joules())
        except Exception:  # the window's energy is lost, never guessed
            self.read_errors += 1
            return None
        return self.clock(), joules

    def start(self) -> None:
        if not self.running:
            self._start = self._read()

    def stop(self) -> DeviceEnergy | None:
        """The energy between the two reads; None if a read failed or the counter went backwards (reset)."""
        begin, self._start = self._start, None
        end = self._read() if begin is not None else None
        if begin is None or end is None or end[1] < begin[1]:
            return None
        duration, energy = end[0] - begin[0], end[1] - begin[1]
        return DeviceEnergy(
            method=self.counter.counter_method, samples=2, duration_s=duration, energy_j=energy,
            avg_power_w=energy / duration if duration > 0 else None, read_errors=self.read_errors,
            source="energy_counter",
        )


DeviceMeter = CounterWindow | PowerSampler


def device_meter(reader: PowerReader, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> DeviceMeter:
    """The device's energy counter when it has one that reads, else the power sampler (the fallback)."""
    read_joules = getattr(reader, "read_joules", None)
    if read_joules is not None:
        try:
            value = float(read_joules())
        except Exception:  # no counter on this device or driver: sample power instead
            value = math.nan
        if math.isfinite(value):
            return CounterWindow(reader, clock=clock)
    return PowerSampler(reader, interval_s=interval_s, clock=clock)


def null_power_metrics(reason: str, gpus_total: int | None = None) -> PowerMetrics:
    """Every figure null, with why (cpu, missing library, no samples)."""
    return PowerMetrics(gpus_total=gpus_total, reason=reason)


def _how(source: EnergySource) -> str:
    if source == "energy_counter":
        return "energy counter read at both ends of the measured steps"
    return "trapezoid over power samples during the measured steps"


def power_metrics(
    devices: Sequence[DeviceEnergy | dict[str, Any] | None], *, gpus_total: int, tokens: int | None,
    gathered_note: str = "each rank measures its own GPU; rank 0 gathers",
) -> PowerMetrics:
    """The result's ``power_metrics`` from one entry per GPU (None where that GPU was not measured).

    ``tokens`` is the number of tokens all GPUs processed during the measured window
    (measured steps * GBS * SL). Totals (energy, tokens per kWh) are given only when
    every GPU of the job was measured; a partial set keeps per-GPU figures and says so.
    """
    measured = [DeviceEnergy(**d) if isinstance(d, dict) else d for d in devices if d is not None]
    if not measured:
        return null_power_metrics("no power samples were collected", gpus_total)
    sources = {d.source for d in measured}
    source: EnergySource = "energy_counter" if sources == {"energy_counter"} else "power_sampler"
    methods = ", ".join(sorted({d.method for d in measured}))
    per_gpu = [d.avg_power_w for d in measured]
    known = [p for p in per_gpu if p is not None]
    timed = [d for d in measured if d.duration_s > 0]
    fields: dict[str, Any] = {
        "avg_power_w_per_gpu": statistics.fmean(known) if known else None, "per_gpu_avg_power_w": per_gpu,
        "tokens": tokens, "duration_s": max(d.duration_s for d in measured),
        "samples": sum(d.samples for d in measured),
        "sample_rate_hz": min(d.samples / d.duration_s for d in timed) if timed and source == "power_sampler" else None,
        "read_errors": sum(d.read_errors for d in measured), "gpus_measured": len(measured),
        "gpus_total": gpus_total, "energy_source": source, "method": f"{methods}: {_how(source)}; {gathered_note}",
    }
    if len(measured) < gpus_total:
        return PowerMetrics(**fields, reason=f"only {len(measured)} of {gpus_total} GPUs measured: energy totals "
                                             "and tokens per kWh not computed")
    energy = math.fsum(d.energy_j for d in measured)
    kwh = energy / JOULES_PER_KWH
    per_kwh = tokens / kwh if tokens is not None and energy > 0 else None
    reason = None
    if tokens is None:
        reason = "token count unknown: tokens per kWh not computed"
    elif per_kwh is None:
        reason = "no energy was measured (zero): tokens per kWh not computed"
    return PowerMetrics(**fields, energy_j=energy, energy_kwh=kwh, tokens_per_kwh=per_kwh, reason=reason)


def log_power_metrics(
    energy_j_per_gpu: Sequence[float],
    power_w_per_gpu: Sequence[float | None],
    step_times: Sequence[float | None],
    *,
    world_size: int | None,
    tokens_per_step: int | None,
) -> PowerMetrics:
    """``power_metrics`` from Megatron's ``--log-energy`` fields, one value per measured iteration.

    Megatron logs energy per GPU per iteration, so the job's energy is the sum times
    the world size; without a world size only the per-GPU average power is known.
    """
    if not energy_j_per_gpu:
        return null_power_metrics("the log has no energy/power fields (Megatron prints them only with "
                                  "--log-energy); board power was not measured for this framework", world_size)
    powers = [p for p in power_w_per_gpu if p is not None]
    steps = len(energy_j_per_gpu)
    common = {
        "avg_power_w_per_gpu": statistics.fmean(powers) if powers else None,
        "duration_s": math.fsum(t for t in step_times if t is not None), "samples": steps,
        "energy_source": "log", "gpus_total": world_size,
        "method": "Megatron --log-energy: energy per GPU per iteration from the log, times the world size",
    }
    if world_size is None:
        return PowerMetrics(**common, reason="world size unknown: energy totals not computed")
    energy = math.fsum(energy_j_per_gpu) * world_size
    kwh = energy / JOULES_PER_KWH
    tokens = steps * tokens_per_step if tokens_per_step is not None else None
    per_kwh = tokens / kwh if tokens is not None and kwh > 0 else None
    return PowerMetrics(**common, energy_j=energy, energy_kwh=kwh, tokens=tokens, tokens_per_kwh=per_kwh,
                        gpus_measured=world_size,
                        reason=None if per_kwh is not None else "token count or energy unknown: tokens per kWh "
                                                                "not computed")


@dataclass
class MeasuredWindow:
    """Energy over the measured steps of one run, as an in-process trainer uses it.

    ``start()`` before the first post-warm-up step, ``stop(steps_done, gather)`` after the
    last step on every rank (``gather`` collects one entry per GPU, e.g. through
    ``torch.distributed.all_gather_object``), ``metrics(steps_done)`` on rank 0 for the
    result. If the run ends abnormally, ``metrics`` stops the local meter itself and
    reports this GPU only, because a collective with possibly dead peers could hang.
    """

    meter: DeviceMeter | None
    reason: str | None
    gpus_total: int
    tokens_per_step: int
    warmup_steps: int
    devices: list[DeviceEnergy | dict[str, Any] | None] | None = None
    steps_at_stop: int | None = None
    note: str = "each rank measures its own GPU; rank 0 gathers"

    @classmethod
    def open(cls, platform: str, device_index: int, *, gpus_total: int, tokens_per_step: int,
             warmup_steps: int) -> MeasuredWindow:
        """The window for this rank's GPU: its energy counter, the sampler, or nothing with the reason."""
        reader, reason = open_reader(platform, device_index)
        return cls(device_meter(reader) if reader is not None else None, reason, gpus_total=gpus_total,
                   tokens_per_step=tokens_per_step, warmup_steps=warmup_steps)

    @property
    def running(self) -> bool:
        return self.meter is not None and self.meter.running

    def start(self) -> None:
        if self.meter is not None:
            self.meter.start()

    def stop(self, steps_done: int, gather: Callable[[Any], list[Any]] | None = None) -> None:
        if not self.running:
            return
        assert self.meter is not None
        local = self.meter.stop()
        self.steps_at_stop = steps_done
        self.devices = gather(local.as_dict() if local else None) if gather else [local]

    def metrics(self, steps_done: int) -> PowerMetrics:
        if self.meter is None:
            return null_power_metrics(self.reason or "no power reader", self.gpus_total)
        if self.running:
            self.stop(steps_done)
            self.note = "run ended early: only this rank's GPU (not gathered)"
        sampled_steps = (self.steps_at_stop or 0) - self.warmup_steps
        if self.devices is None or sampled_steps <= 0:
            return null_power_metrics("no measured (post-warm-up) step ran, so no energy was measured",
                                      self.gpus_total)
        return power_metrics(self.devices, gpus_total=self.gpus_total,
                             tokens=sampled_steps * self.tokens_per_step, gathered_note=self.note)
