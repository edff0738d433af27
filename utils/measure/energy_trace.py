"""The launcher's energy measurement: every GPU's energy counter sampled from outside the framework.

Why from outside: Megatron, Primus and NeMo run as a child process, so only the launcher can read their GPUs' counters
(``utils/machine/device_counters.py``); it samples them from before the child starts until it ends. The energy is taken
over the measured steps (:class:`StepWindow`, from the run's own timestamps), bounded by the readings nearest the
window's ends. Bad counters are never guessed around: an erroring reading is skipped, and a counter that goes backwards
is a wrap only when its modulus is known and the power plausible, else that GPU's energy is null with the reason.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol

from utils.machine.device_counters import open_counter
from utils.measure.power import JOULES_PER_KWH, Periodic
from utils.schema.measures import PowerMetrics

DEFAULT_INTERVAL_S = 0.5
MAX_PLAUSIBLE_W = 3000.0  # per GPU, well above any board's limit: a "wrap" implying more is a reset
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(\.\d+)?$")


class EnergyCounter(Protocol):
    """One GPU's cumulative energy counter (``utils/machine/device_counters.py``'s NVML and amdsmi readers)."""

    counter_method: str

    def read_joules(self) -> float: ...


@dataclass(frozen=True)
class Reading:
    """Every GPU's counter at one moment (``unix_s``, the host's wall clock); None where a read failed."""

    unix_s: float
    joules: tuple[float | None, ...]


@dataclass(frozen=True)
class StepWindow:
    """The measured steps' wall-clock window, what it came from, and how many steps it holds."""

    start_unix: float
    end_unix: float
    steps: int
    label: str


@dataclass
class CounterTrace(Periodic):
    """Timed readings of every GPU's energy counter, sampled by a thread between :meth:`start` and :meth:`stop`."""

    counters: Sequence[EnergyCounter]
    interval_s: float = DEFAULT_INTERVAL_S
    clock: Callable[[], float] = time.time
    modulus_j: Sequence[float | None] | None = None  # per GPU: where the counter wraps, when known
    readings: list[Reading] = field(default_factory=list)
    read_errors: int = 0
    thread_name: ClassVar[str] = "tprimat-energy-trace"

    def __post_init__(self) -> None:
        if not 0 < self.interval_s <= 5.0:
            raise ValueError(f"interval_s={self.interval_s}: must be in (0, 5]")
        if not self.counters:
            raise ValueError("no energy counter to sample")

    @property
    def methods(self) -> str:
        return ", ".join(sorted({c.counter_method for c in self.counters}))

    def sample(self) -> None:
        values: list[float | None] = []
        for counter in self.counters:
            try:
                value = float(counter.read_joules())
            except Exception:  # one lost reading; its neighbours still bound the window
                value = math.nan
            if not math.isfinite(value):
                self.read_errors += 1
                values.append(None)
            else:
                values.append(value)
        self.readings.append(Reading(self.clock(), tuple(values)))

    def start(self) -> None:
        """First reading now (before the child starts), then one every ``interval_s``."""
        self.begin()

    def stop(self) -> None:
        """Stop the thread and take the last reading (after the child ended)."""
        self.end()

    def __enter__(self) -> CounterTrace:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def open_trace(platform: str, gpus: int, library: Any | None = None,
               interval_s: float = DEFAULT_INTERVAL_S) -> tuple[CounterTrace | None, str | None]:
    """A trace of the node's first ``gpus`` visible GPUs' counters, or ``(None, reason)``. The launcher never
    initialises a GPU runtime: devices are opened by their visible index."""
    counters = []
    for index in range(gpus):
        counter, reason = open_counter(platform, index, library)
        if counter is None:
            return None, reason
        counters.append(counter)
    if not counters:
        return None, "no GPU on this node to measure"
    modulus = [getattr(c, "counter_modulus_j", None) for c in counters]
    return CounterTrace(counters, interval_s=interval_s, modulus_j=modulus), None


# -- the measured window -------------------------------------------------------------------------


def parse_log_time(stamp: str) -> tuple[float, bool] | None:
    """``YYYY-mm-dd HH:MM:SS[.ffffff]`` (Megatron's local time) as Unix seconds, and whether it has sub-seconds."""
    match = _STAMP.match(stamp.strip())
    if match is None:
        return None
    when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")  # naive: the host's local time, as printed
    fraction = float(match.group(2)) if match.group(2) else 0.0
    return when.timestamp() + fraction, match.group(2) is not None


def megatron_window(iterations: Sequence[tuple[int, str | None, float | None]], skip_steps: int
                    ) -> tuple[StepWindow | None, str | None]:
    """The measured steps' window from Megatron/Primus iteration lines: ``(iteration, timestamp, step seconds)``. It
    runs from the last warm-up line to the last line; with whole-second stamps its end is taken mid-second and its start
    is the end minus the logged step times (exact length, position within half a second)."""
    stamped = []
    for iteration, stamp, seconds in iterations:
        parsed = parse_log_time(stamp) if stamp else None
        if parsed is not None:
            stamped.append((iteration, parsed[0], parsed[1], seconds))
    if not stamped:
        return None, "the log's iteration lines carry no timestamps (older Megatron): no window to measure energy on"
    last_it, last_t, fine, _ = stamped[-1]
    before = [s for s in stamped if s[0] <= skip_steps]
    first_it = before[-1][0] if before else stamped[0][0]
    steps = last_it - first_it
    if steps <= 0:
        return None, "no measured (post-warm-up) iteration has a timestamped line: no window to measure energy on"
    if fine:
        first_t = next(s[1] for s in stamped if s[0] == first_it)
        label = f"Megatron log timestamps of iterations {first_it} and {last_it} (sub-second)"
        return StepWindow(first_t, last_t, steps, label), None
    measured = [s[3] for s in stamped if first_it < s[0] <= last_it]
    if len(measured) != steps or any(t is None for t in measured):
        first_t = next(s[1] for s in stamped if s[0] == first_it)
        label = f"Megatron log timestamps of iterations {first_it} and {last_it} (whole seconds: +-1 s per end)"
        return StepWindow(first_t, last_t, steps, label), None
    end = last_t + 0.5
    length = math.fsum(t for t in measured if t is not None)
    label = (f"iterations {first_it + 1}-{last_it}: ends at the last line's timestamp (whole seconds, taken "
             f"mid-second), length the sum of the log's {steps} elapsed times ({length:.3f} s)")
    return StepWindow(end - length, end, steps, label), None


def monitor_window(start_unix: float | None, end_unix: float | None, steps: int) -> tuple[StepWindow | None,
                                                                                          str | None]:
    """The window an in-process trainer measured (``StepMonitor.start_window``/``finish``, both synchronized)."""
    if start_unix is None or end_unix is None or end_unix <= start_unix or steps <= 0:
        return None, "the run reported no finished measured window: no window to measure energy on"
    return StepWindow(start_unix, end_unix, steps, f"the trainer's synchronized window of {steps} measured steps"), None


# -- energy over the window ----------------------------------------------------------------------


@dataclass(frozen=True)
class GpuWindowEnergy:
    """One GPU's energy between the readings nearest the window's ends, or why there is none."""

    energy_j: float | None
    start_unix: float | None = None
    end_unix: float | None = None
    wrapped: int = 0
    reason: str | None = None

    @property
    def duration_s(self) -> float | None:
        if self.start_unix is None or self.end_unix is None:
            return None
        return self.end_unix - self.start_unix

    @property
    def avg_power_w(self) -> float | None:
        seconds = self.duration_s
        return self.energy_j / seconds if self.energy_j is not None and seconds else None


def _nearest(readings: Sequence[Reading], gpu: int, when: float) -> int | None:
    best, best_gap = None, math.inf
    for index, reading in enumerate(readings):
        if reading.joules[gpu] is not None and abs(reading.unix_s - when) < best_gap:
            best, best_gap = index, abs(reading.unix_s - when)
    return best


def gpu_energy(readings: Sequence[Reading], gpu: int, window: StepWindow, *, max_offset_s: float,
               modulus_j: float | None = None) -> GpuWindowEnergy:
    """Energy of one GPU over ``window``: the sum of increments between its nearest readings, wraps handled."""
    first, last = _nearest(readings, gpu, window.start_unix), _nearest(readings, gpu, window.end_unix)
    if first is None or last is None:
        return GpuWindowEnergy(None, reason=f"GPU {gpu}: no counter reading")
    for index, when in ((first, window.start_unix), (last, window.end_unix)):
        if abs(readings[index].unix_s - when) > max_offset_s:
            return GpuWindowEnergy(None, reason=f"GPU {gpu}: the nearest counter reading is "
                                                f"{abs(readings[index].unix_s - when):.1f} s from the window's end "
                                                f"(more than {max_offset_s:.1f} s)")
    if last <= first:
        return GpuWindowEnergy(None, reason=f"GPU {gpu}: the window is shorter than one sampling interval")
    valid = [r for r in readings[first:last + 1] if r.joules[gpu] is not None]
    total, wraps = 0.0, 0
    for before, after in itertools.pairwise(valid):
        delta = after.joules[gpu] - before.joules[gpu]  # type: ignore[operator]
        if delta < 0:
            wrapped = delta + modulus_j if modulus_j else None
            seconds = max(after.unix_s - before.unix_s, 1e-9)
            if wrapped is None or wrapped / seconds > MAX_PLAUSIBLE_W:
                return GpuWindowEnergy(None, reason=f"GPU {gpu}: the energy counter went backwards by {-delta:.1f} J "
                                                    "inside the window (a driver reload or GPU reset): energy not "
                                                    "measured")
            delta, wraps = wrapped, wraps + 1
        total += delta
    return GpuWindowEnergy(total, readings[first].unix_s, readings[last].unix_s, wraps)


def window_power_metrics(trace: CounterTrace | None, window: StepWindow | None, *, tokens_per_step: int | None,
                         gpus_total: int, reason: str | None = None) -> PowerMetrics:
    """``power_metrics`` over the measured steps from the launcher's trace; nulls with the reason otherwise."""
    if trace is None or window is None:
        return PowerMetrics(gpus_total=gpus_total, reason=reason or "no energy trace or no measured window",
                            window=window.label if window else None)
    max_offset = max(2.0 * trace.interval_s, 1.0)
    gpus = len(trace.counters)
    moduli = list(trace.modulus_j or [None] * gpus)
    per_gpu = [gpu_energy(trace.readings, g, window, max_offset_s=max_offset, modulus_j=moduli[g])
               for g in range(gpus)]
    measured = [e for e in per_gpu if e.energy_j is not None]
    problems = [e.reason for e in per_gpu if e.reason]
    offsets = [abs(v) for e in measured for v in ((e.start_unix or 0.0) - window.start_unix,
                                                    (e.end_unix or 0.0) - window.end_unix)]
    wraps = sum(e.wrapped for e in measured)
    method = (f"{trace.methods} sampled by the launcher every {trace.interval_s:g} s on {gpus} GPU(s) of its node; "
              f"readings nearest the window's ends (at most {max(offsets, default=0.0):.2f} s away)"
              + (f"; {wraps} counter wrap(s) unwrapped" if wraps else ""))
    powers = [e.avg_power_w for e in measured if e.avg_power_w is not None]
    common: dict[str, Any] = {
        "per_gpu_avg_power_w": [e.avg_power_w for e in per_gpu],
        "avg_power_w_per_gpu": math.fsum(powers) / len(powers) if powers else None,
        "duration_s": max((e.duration_s or 0.0 for e in measured), default=None), "samples": len(trace.readings),
        "read_errors": trace.read_errors, "gpus_measured": len(measured), "gpus_total": gpus_total,
        "energy_source": "energy_counter", "method": method, "window": window.label,
    }
    tokens = window.steps * tokens_per_step if tokens_per_step is not None else None
    if problems or len(measured) < gpus_total:
        why = "; ".join(problems) if problems else f"only {len(measured)} of {gpus_total} GPUs measured (this node's)"
        return PowerMetrics(**common, tokens=tokens, reason=f"{why}: energy totals and tokens per kWh not computed")
    energy = math.fsum(e.energy_j for e in measured if e.energy_j is not None)
    kwh = energy / JOULES_PER_KWH
    per_kwh = tokens / kwh if tokens is not None and energy > 0 else None
    why_not = None
    if per_kwh is None:
        why_not = f"{'token count unknown' if tokens is None else 'no energy (zero)'}: tokens per kWh not computed"
    return PowerMetrics(**common, energy_j=energy, energy_kwh=kwh, tokens=tokens, tokens_per_kwh=per_kwh,
                        reason=why_not)


def energy_between(trace: CounterTrace, start_unix: float, end_unix: float, gpus_total: int) -> tuple[float | None,
                                                                                                        str | None]:
    """(kWh of the node's GPUs between two wall-clock times, or None with why): energy to a target (issue 34)."""
    if end_unix <= start_unix:
        return None, "the span to the target has no length: energy not computed"
    window = StepWindow(start_unix, end_unix, 1, "from the first training step's start to the evaluation at the "
                                                 "target")
    metrics = window_power_metrics(trace, window, tokens_per_step=None, gpus_total=gpus_total)
    if metrics.energy_kwh is None:
        return None, metrics.reason or "energy not measured"
    return metrics.energy_kwh, None
