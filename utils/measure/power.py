"""Board energy and power during the measured steps: the one producer of ``power_metrics``.

Best source first (``PowerMetrics.energy_source``): the device's cumulative energy counter read at both ends of the
window, else board power sampled in a thread and integrated, else Megatron's ``--log-energy`` fields. Every rank
measures its own GPU and rank 0 gathers them (never rank 0's figure times the world size). On cpu every value is null
with a reason: CPU package power is no GPU board power.
"""

from __future__ import annotations

import itertools
import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from utils.machine.device_counters import PowerReader, open_reader
from utils.schema.measures import PowerMetrics

JOULES_PER_KWH = 3.6e6
DEFAULT_INTERVAL_S = 0.2
EnergySource = Literal["energy_counter", "power_sampler"]


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
    """A daemon thread that calls :meth:`sample` at :meth:`begin`, every ``interval_s`` after, and at :meth:`end`. The
    power sampler below and the launcher's energy-counter trace (``utils/measure/energy_trace.py``) share it: each has
    its own ``interval_s`` field and says what one sample is, and when it starts and stops."""

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
    """The result's ``power_metrics`` from one entry per GPU (None where that GPU was not measured). ``tokens``: all
    GPUs' tokens in the measured window. Totals only when every GPU was measured."""
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
    """``power_metrics`` from Megatron's ``--log-energy`` fields, one value per measured iteration. Megatron logs energy
    per GPU per iteration, so the job's energy is the sum times the world size; without a world size only the per-GPU
    average power is known."""
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
    """Energy over the measured steps of one run, as an in-process trainer uses it. ``start()`` before the first
    measured step, ``stop(steps_done, gather)`` after the last on every rank, ``metrics(steps_done)`` on rank 0. After
    an abnormal end ``metrics`` reports this GPU only: a collective with possibly dead peers could hang."""

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
