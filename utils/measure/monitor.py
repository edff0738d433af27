"""Step measurement, the same for every framework: device events on GPUs, the host clock on cpu.

Why events: a per-step ``synchronize`` drains the launch queue (0.7% of an H100 step), so each step is timed by a pair
of device events read ``lag`` steps later and the loss is copied asynchronously (events agree with a synchronized timer
to 0.02%); one synchronize at each end of the window lets :meth:`StepMonitor.wall_check` compare with the wall clock.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from utils.measure.metrics import finite

GIB = 1024**3
DEFAULT_LAG = 4  # steps the event reads may trail the host; the GPU queue stays this many steps deep
WALL_TOLERANCE = 0.05  # sum of measured steps vs the wall clock over their window


class DeviceEvent(Protocol):
    """The part of ``torch.cuda.Event(enable_timing=True)`` the monitor uses (tests pass a fake)."""

    def record(self) -> None: ...

    def query(self) -> bool: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end_event: Any) -> float: ...  # milliseconds


@dataclass
class StepRecord:
    """One step. On the event path ``time_s`` (and a device loss) are filled when the step is read."""

    step: int
    time_s: float | None
    loss: float | None
    lr: float | None
    memory_allocated_gb: float | None

    @property
    def complete(self) -> bool:
        return self.time_s is not None


@dataclass
class _Pending:
    """A step whose events (and loss copy) are still in the device queue."""

    record: StepRecord
    start: DeviceEvent
    end: DeviceEvent
    loss: Any = None  # host tensor being filled by an async copy, read once ``ready`` completed
    ready: DeviceEvent | None = None

    @property
    def last(self) -> DeviceEvent:
        return self.ready if self.ready is not None else self.end


@dataclass
class WallCheck:
    """Sum of the measured steps against the wall clock over the same window (one sync at each end)."""

    steps: int
    steps_s: float
    window_s: float
    tolerance: float = WALL_TOLERANCE

    @property
    def ratio(self) -> float | None:
        return self.steps_s / self.window_s if self.window_s > 0 else None

    @property
    def warning(self) -> str | None:
        """One line when the sum and the window disagree by more than the tolerance, else None."""
        ratio = self.ratio
        if ratio is None or abs(ratio - 1.0) <= self.tolerance:
            return None
        return (f"the {self.steps} measured steps add up to {self.steps_s:.3f} s but their window took "
                f"{self.window_s:.3f} s by the wall clock ({100 * (ratio - 1):+.1f}%, tolerance "
                f"{100 * self.tolerance:.0f}%): time outside the steps, or a timing fault")


def cuda_event() -> DeviceEvent:
    return torch.cuda.Event(enable_timing=True)


@dataclass
class StepMonitor:
    """Framework-agnostic step timer: :meth:`start_step` / :meth:`end_step` around each step. On a ``cuda`` device
    (CUDA or ROCm) steps are timed by ``event_factory``'s events, read up to ``lag`` steps late; :meth:`drain` and
    :meth:`finish` hand out the records completed since. ``records`` holds every ended step, complete or not."""

    device: Any = None
    clock: Callable[[], float] = time.perf_counter
    lag: int = DEFAULT_LAG
    event_factory: Callable[[], DeviceEvent] | None = None
    records: list[StepRecord] = field(default_factory=list)
    _started: Any = None
    _pending: deque[_Pending] = field(default_factory=deque)
    _ready: list[StepRecord] = field(default_factory=list)
    _window: tuple[int, float] | None = None  # (steps before the window, host clock at its start)
    _window_end: float | None = None
    window_unix: tuple[float | None, float | None] = (None, None)  # wall clock at the window's ends (energy)

    def __post_init__(self) -> None:
        if self.lag < 0:
            raise ValueError(f"lag={self.lag}: must be >= 0")

    @property
    def _on_gpu(self) -> bool:
        return self.device is not None and getattr(self.device, "type", None) == "cuda"

    @property
    def uses_events(self) -> bool:
        return self.event_factory is not None or self._on_gpu

    def _event(self) -> DeviceEvent:
        event = (self.event_factory or cuda_event)()
        event.record()
        return event

    def _sync(self) -> None:
        if self._on_gpu:
            torch.cuda.synchronize(self.device)

    def _allocated_gb(self) -> float | None:
        if self._on_gpu:
            return torch.cuda.memory_allocated(self.device) / GIB  # the allocator's counter: no sync
        return None

    # -- per step ------------------------------------------------------------
    def start_step(self) -> None:
        self._started = self._event() if self.uses_events else self.clock()

    def end_step(self, loss: Any = None, lr: float | None = None) -> StepRecord:
        """End the step; its record (complete at once on cpu, completed later on the event path). ``loss`` is a float, a
        tensor (on the device: copied to the host asynchronously, never synchronized here) or None."""
        if self._started is None:
            raise RuntimeError("end_step() called without start_step()")
        started, self._started = self._started, None
        record = StepRecord(step=len(self.records) + 1, time_s=None, loss=None,
                            lr=None if lr is None else float(lr), memory_allocated_gb=self._allocated_gb())
        self.records.append(record)
        if not self.uses_events:
            record.time_s = self.clock() - started
            record.loss = _host_float(loss)
            self._ready.append(record)
            return record
        pending = _Pending(record, started, self._event())
        if _on_device(loss):
            pending.loss = loss.detach().to("cpu", non_blocking=True)  # pinned, queued behind the step
            pending.ready = self._event()
        else:
            record.loss = _host_float(loss)
        self._pending.append(pending)
        self._read(block=False)
        return record

    def _read(self, block: bool) -> None:
        """Complete the oldest pending steps whose events are done; wait only beyond ``lag`` (or all if ``block``)."""
        while self._pending:
            oldest = self._pending[0]
            if not oldest.last.query():
                if not block and len(self._pending) <= self.lag:
                    return
                oldest.last.synchronize()  # a step `lag` behind: the queue still holds the newer ones
            self._pending.popleft()
            record = oldest.record
            record.time_s = oldest.start.elapsed_time(oldest.end) / 1000.0
            if oldest.loss is not None:
                record.loss = _host_float(oldest.loss)
            self._ready.append(record)

    def drain(self) -> list[StepRecord]:
        """Records completed since the last call, oldest first (reads finished events; never waits)."""
        if self._pending:
            self._read(block=False)
        ready, self._ready = self._ready, []
        return ready

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- the measured window ---------------------------------------------------
    def start_window(self) -> None:
        """Before the first measured step: one synchronize, then the host clock (the wall check's start)."""
        self._sync()
        self._window = (len(self.records), self.clock())
        self.window_unix = (time.time(), None)

    def finish(self) -> list[StepRecord]:
        """After the last step: one synchronize, every pending step read; the records completed now. On an abnormal end
        the device may refuse to synchronize; the steps read so far are kept."""
        try:
            self._sync()
            if self._window_end is None:  # a second call (a result writer after the loop) keeps the first end
                self._window_end = self.clock()
                if self._window is not None:
                    self.window_unix = (self.window_unix[0], time.time())
            self._read(block=True)
        except Exception:  # a failed device: keep what was read, never hang or mask the run's own error
            self._pending.clear()
        return self.drain()

    def wall_check(self) -> WallCheck | None:
        """The measured steps' sum against the window's wall time; None without a finished window."""
        if self._window is None or self._window_end is None:
            return None
        first, begun = self._window
        measured = [r.time_s for r in self.records[first:] if r.time_s is not None]
        return WallCheck(steps=len(measured), steps_s=math.fsum(measured), window_s=self._window_end - begun)

    # -- results ---------------------------------------------------------------
    def peak_memory(self) -> tuple[float | None, float | None]:
        """(peak allocated, peak reserved) in GiB on a GPU; (None, None) on cpu."""
        if self._on_gpu:
            return (torch.cuda.max_memory_allocated(self.device) / GIB,
                    torch.cuda.max_memory_reserved(self.device) / GIB)
        return None, None

    def arrays(self) -> dict[str, list[float | None]]:
        """Per-step arrays in the result's names, over the complete steps (non-finite values become null). Call
        :meth:`finish` first: a step still in the device queue is not a measured step."""
        done = [r for r in self.records if r.complete]
        return {
            "step_times": [r.time_s for r in done],
            "loss_values": [finite(r.loss) for r in done],
            "learning_rates": [finite(r.lr) for r in done],
            "memory_allocated_gb": [r.memory_allocated_gb for r in done],
        }


def _on_device(value: Any) -> bool:
    device = getattr(value, "device", None)
    return device is not None and getattr(device, "type", "cpu") != "cpu"


def _host_float(value: Any) -> float | None:
    """A host value as a float (a host tensor's ``item``; None stays None)."""
    if value is None:
        return None
    return float(value.item()) if hasattr(value, "item") else float(value)
