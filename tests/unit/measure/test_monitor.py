"""utils/measure/monitor.py: the step timer (host clock on cpu, lagged device-event reads on GPUs) and its arrays."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from utils.measure.monitor import StepMonitor, WallCheck


def test_step_monitor_with_a_fake_clock():
    ticks = iter([0.0, 0.5, 1.0, 1.25])
    monitor = StepMonitor(clock=lambda: next(ticks))
    monitor.start_step()
    first = monitor.end_step(loss=2.0, lr=1e-3)
    monitor.start_step()
    monitor.end_step(loss=float("nan"), lr=1e-3)
    assert (first.step, first.time_s, first.loss) == (1, 0.5, 2.0)
    assert [r.step for r in monitor.drain()] == [1, 2]  # the host timer completes every step at once
    arrays = monitor.arrays()
    assert arrays["step_times"] == [0.5, 0.25]
    assert arrays["loss_values"] == [2.0, None]  # NaN is recorded as null, never as a number
    assert arrays["learning_rates"] == [1e-3, 1e-3]
    assert arrays["memory_allocated_gb"] == [None, None]
    with pytest.raises(RuntimeError):
        monitor.end_step()


def test_cpu_has_no_device_memory():
    monitor = StepMonitor()
    assert monitor.peak_memory() == (None, None)


def test_monitor_module_is_only_the_timer():
    import utils.measure.monitor as module

    public = {name for name in vars(module) if not name.startswith("_") and callable(getattr(module, name))}
    assert {"StepMonitor", "StepRecord"} <= public
    assert not {"fill_result", "performance_block", "memory_block", "LightningMeasurement"} & public


# -- the event path, on a fake device ------------------------------------------------------------


@dataclass
class FakeStream:
    """A device queue: work is enqueued in ms of device time; ``done_ms`` is how far the device has run."""

    queued_ms: float = 0.0
    done_ms: float = 0.0
    synchronizes: list[float] = field(default_factory=list)

    def enqueue(self, ms: float) -> None:
        self.queued_ms += ms

    def run_all(self) -> None:
        self.done_ms = self.queued_ms


@dataclass
class FakeEvent:
    """The calls StepMonitor makes on ``torch.cuda.Event(enable_timing=True)``, on a FakeStream."""

    stream: FakeStream
    at_ms: float | None = None

    def record(self) -> None:
        self.at_ms = self.stream.queued_ms

    def query(self) -> bool:
        return self.at_ms is not None and self.stream.done_ms >= self.at_ms

    def synchronize(self) -> None:
        assert self.at_ms is not None
        self.stream.synchronizes.append(self.at_ms)
        self.stream.done_ms = max(self.stream.done_ms, self.at_ms)  # waits for this event, not the whole queue

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.query() and end.query()):
            raise RuntimeError("event not completed")  # CUDA refuses too
        return end.at_ms - self.at_ms


@dataclass
class FakeLoss:
    """A loss tensor on the device: its host copy holds the value only once the stream has run past it."""

    stream: FakeStream
    value: float
    device: Any = field(default_factory=lambda: type("Dev", (), {"type": "cuda"})())

    def detach(self) -> FakeLoss:
        return self

    def to(self, where: str, non_blocking: bool = False) -> Any:
        assert where == "cpu" and non_blocking, "the loss must be copied asynchronously"
        stream, value, copied_at = self.stream, self.value, self.stream.queued_ms

        class HostCopy:
            def item(self) -> float:
                assert stream.done_ms >= copied_at, "read before the async copy completed"
                return value

        return HostCopy()


def event_monitor(stream: FakeStream, lag: int, clock: Any = None) -> StepMonitor:
    kwargs = {"clock": clock} if clock else {}
    return StepMonitor(lag=lag, event_factory=lambda: FakeEvent(stream), **kwargs)


def run_steps(monitor: StepMonitor, stream: FakeStream, durations: list[float]) -> list[list[int]]:
    """Enqueue each step's work without running the device; the steps completed after each end_step."""
    completed = []
    for index, ms in enumerate(durations):
        monitor.start_step()
        stream.enqueue(ms)
        monitor.end_step(loss=FakeLoss(stream, 10.0 - index), lr=1e-3)
        completed.append([r.step for r in monitor.drain()])
    return completed


def test_events_are_read_lag_steps_behind_without_draining_the_queue():
    stream = FakeStream()
    monitor = event_monitor(stream, lag=2)
    completed = run_steps(monitor, stream, [10.0, 20.0, 30.0, 40.0, 50.0])
    # Steps 1 and 2 stay queued; from step 3 on, the step `lag` behind is read as each new one ends.
    assert completed == [[], [], [1], [2], [3]]
    # Each wait was for that old step's end, never for the whole queue: the device still had work queued.
    assert stream.synchronizes and all(at < stream.queued_ms for at in stream.synchronizes)
    assert monitor.pending == 2
    assert [r.step for r in monitor.finish()] == [4, 5]
    arrays = monitor.arrays()
    assert arrays["step_times"] == pytest.approx([0.010, 0.020, 0.030, 0.040, 0.050])
    assert arrays["loss_values"] == [10.0, 9.0, 8.0, 7.0, 6.0]
    assert arrays["learning_rates"] == [1e-3] * 5


def test_a_device_that_keeps_up_is_read_without_any_wait():
    stream = FakeStream()
    monitor = event_monitor(stream, lag=4)
    for ms in (5.0, 6.0, 7.0):
        monitor.start_step()
        stream.enqueue(ms)
        monitor.end_step(lr=1e-3)
        stream.run_all()
        assert len(monitor.drain()) == 1  # already done on the device: read at once, no synchronize
    assert stream.synchronizes == []
    assert monitor.arrays()["step_times"] == pytest.approx([0.005, 0.006, 0.007])


def test_records_are_counted_at_once_and_completed_later():
    stream = FakeStream()
    monitor = event_monitor(stream, lag=8)
    run_steps(monitor, stream, [1.0, 2.0, 3.0])
    assert len(monitor.records) == 3 and not any(r.complete for r in monitor.records)
    assert monitor.arrays()["step_times"] == []  # a step still in the queue is not a measured step
    monitor.finish()
    assert all(r.complete for r in monitor.records)


def test_lag_zero_reads_every_step_as_it_ends():
    stream = FakeStream()
    monitor = event_monitor(stream, lag=0)
    assert run_steps(monitor, stream, [1.0, 2.0]) == [[1], [2]]


def test_the_wall_check_compares_the_measured_steps_with_their_window():
    stream = FakeStream()
    ticks = iter([100.0, 100.2])  # host clock at start_window and at finish
    monitor = event_monitor(stream, lag=2, clock=lambda: next(ticks))
    run_steps(monitor, stream, [500.0])  # a warm-up step, outside the window
    monitor.start_window()
    run_steps(monitor, stream, [100.0, 99.0])
    monitor.finish()
    check = monitor.wall_check()
    assert (check.steps, check.steps_s, check.window_s) == (2, pytest.approx(0.199), pytest.approx(0.2))
    assert check.warning is None
    monitor.finish()  # idempotent: a second call does not move the window's end
    assert monitor.wall_check().window_s == pytest.approx(0.2)
    start_unix, end_unix = monitor.window_unix  # the wall clock at both ends, for the launcher's energy window
    assert start_unix is not None and end_unix is not None and end_unix >= start_unix
    slow = WallCheck(steps=2, steps_s=0.1, window_s=0.2)
    assert slow.warning is not None and "-50.0%" in slow.warning
    assert WallCheck(steps=0, steps_s=0.0, window_s=0.0).warning is None


def test_without_a_window_there_is_no_wall_check():
    monitor = StepMonitor()
    monitor.start_step()
    monitor.end_step()
    monitor.finish()
    assert monitor.wall_check() is None


def test_a_device_that_fails_at_the_end_keeps_the_steps_read():
    stream = FakeStream()
    monitor = event_monitor(stream, lag=1)
    run_steps(monitor, stream, [1.0, 2.0, 3.0])

    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monitor.device = type("Dev", (), {"type": "cuda"})()
    monitor._sync = broken  # type: ignore[method-assign]
    monitor.finish()
    assert monitor.arrays()["step_times"] == pytest.approx([0.001, 0.002])
    assert monitor.pending == 0


def test_negative_lag_is_refused():
    with pytest.raises(ValueError):
        StepMonitor(lag=-1)
