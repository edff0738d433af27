"""utils/measure/energy_trace.py: the launcher's counter trace, the measured window from a log, energy over it."""

from __future__ import annotations

import itertools
import time
from datetime import datetime

import pytest

from tests.helpers.devices import FakeAmdSmi, FakeNvml
from tests.helpers.paths import FIXTURES
from utils.measure.energy_trace import (
    CounterTrace,
    Reading,
    StepWindow,
    gpu_energy,
    megatron_window,
    monitor_window,
    open_trace,
    parse_log_time,
    window_power_metrics,
)
from utils.measure.power import JOULES_PER_KWH

LOGS = FIXTURES / "logs"


class FakeCounter:
    """A cumulative energy counter in joules: ``values`` in order; an Exception instance is a failed read."""

    counter_method = "fake counter"

    def __init__(self, values: list[float | Exception]) -> None:
        self.values = iter(values)

    def read_joules(self) -> float:
        value = next(self.values)
        if isinstance(value, Exception):
            raise value
        return value


def trace_of(rows: list[tuple[float, tuple[float | None, ...]]], modulus: list[float | None] | None = None,
             interval_s: float = 0.5) -> CounterTrace:
    gpus = len(rows[0][1])
    trace = CounterTrace([FakeCounter([]) for _ in range(gpus)], interval_s=interval_s, modulus_j=modulus)
    trace.readings = [Reading(t, values) for t, values in rows]
    return trace


def megatron_iterations(name: str) -> list[tuple[int, str | None, float | None]]:
    """The fixture log's iterations as the launcher reads them for the window (``train/logs/scan.py``)."""
    from train.logs.scan import iteration_times

    return iteration_times(LOGS / name)


def unix(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").timestamp()


def test_the_sampler_thread_reads_every_gpu_from_start_to_stop() -> None:
    ticks = itertools.count(100.0, 0.5)
    counters = [FakeCounter([float(v) for v in range(0, 10_000, 10)]),
                FakeCounter([RuntimeError("NVML_ERROR_UNKNOWN"), *[float(v) for v in range(5, 10_000, 10)]])]
    trace = CounterTrace(counters, interval_s=0.01, clock=lambda: next(ticks))
    with trace:
        while len(trace.readings) < 4:
            time.sleep(0.005)
    assert len(trace.readings) >= 5  # first reading at start, last at stop
    assert trace.readings[0].joules == (0.0, None) and trace.read_errors == 1  # a failed read is None, counted
    assert [r.unix_s for r in trace.readings] == sorted(r.unix_s for r in trace.readings)


def test_window_energy_is_the_counter_difference_between_the_nearest_readings() -> None:
    # 2 GPUs at 500 W and 400 W, read every 0.5 s from t=0 to t=10.
    rows = [(t / 2, (1000.0 + 250.0 * t, 7.0 + 200.0 * t)) for t in range(21)]
    window = StepWindow(start_unix=2.1, end_unix=8.9, steps=4, label="test")
    metrics = window_power_metrics(trace_of(rows), window, tokens_per_step=1000, gpus_total=2)
    # nearest readings: t=2.0 and t=9.0 -> 7 s: 3500 J + 2800 J
    assert metrics.energy_j == pytest.approx(6300.0)
    assert metrics.per_gpu_avg_power_w == pytest.approx([500.0, 400.0])
    assert metrics.tokens == 4000
    assert metrics.tokens_per_kwh == pytest.approx(4000 / (6300.0 / JOULES_PER_KWH))
    assert metrics.window == "test" and metrics.reason is None and metrics.energy_source == "energy_counter"
    assert "at most 0.10 s away" in metrics.method


def test_a_failed_reading_is_skipped_and_its_neighbours_bound_the_window() -> None:
    rows = [(0.0, (0.0,)), (0.5, (None,)), (1.0, (300.0,)), (1.5, (450.0,))]
    energy = gpu_energy([Reading(t, v) for t, v in rows], 0, StepWindow(0.0, 1.5, 3, "w"), max_offset_s=1.0)
    assert energy.energy_j == pytest.approx(450.0) and energy.avg_power_w == pytest.approx(300.0)


def test_a_counter_that_wraps_is_unwrapped_with_its_modulus() -> None:
    modulus = 2.0**32 * 15.3 / 1e6  # a 32-bit accumulator of 15.3 uJ ticks: 65,712 J
    rows = [(0.0, (modulus - 300.0,)), (1.0, (modulus - 50.0,)), (2.0, (200.0,)), (3.0, (450.0,))]
    metrics = window_power_metrics(trace_of(rows, [modulus]), StepWindow(0.0, 3.0, 3, "w"), tokens_per_step=10,
                                   gpus_total=1)
    assert metrics.energy_j == pytest.approx(750.0)
    assert "1 counter wrap(s) unwrapped" in metrics.method


def test_a_counter_that_goes_backwards_gives_null_with_the_reason() -> None:
    rows = [(0.0, (5000.0,)), (1.0, (5250.0,)), (2.0, (12.0,)), (3.0, (262.0,))]  # a driver reload at t=2
    for modulus in (None, 2.0**64 / 1000.0):  # unknown width, or a 64-bit counter whose "wrap" implies absurd power
        metrics = window_power_metrics(trace_of(rows, [modulus]), StepWindow(0.0, 3.0, 3, "w"), tokens_per_step=10,
                                       gpus_total=1)
        assert metrics.energy_j is None and metrics.tokens_per_kwh is None
        assert "went backwards" in metrics.reason


def test_readings_too_far_from_the_window_give_null() -> None:
    rows = [(0.0, (0.0,)), (1.0, (100.0,))]  # the trace stopped long before the window ended
    metrics = window_power_metrics(trace_of(rows), StepWindow(0.0, 30.0, 3, "w"), tokens_per_step=10, gpus_total=1)
    assert metrics.energy_j is None and "from the window's end" in metrics.reason


def test_only_this_nodes_gpus_give_no_totals() -> None:
    rows = [(0.0, (0.0,)), (1.0, (100.0,))]
    metrics = window_power_metrics(trace_of(rows), StepWindow(0.0, 1.0, 1, "w"), tokens_per_step=10, gpus_total=8)
    assert metrics.energy_j is None and metrics.gpus_measured == 1 and "only 1 of 8" in metrics.reason
    assert metrics.per_gpu_avg_power_w == [pytest.approx(100.0)]


def test_no_trace_or_no_window_is_null_with_the_reason() -> None:
    metrics = window_power_metrics(None, None, tokens_per_step=10, gpus_total=8, reason="amdsmi is not installed")
    assert metrics.energy_j is None and metrics.reason == "amdsmi is not installed"


def test_megatron_window_on_a_recorded_log_with_whole_second_stamps() -> None:
    iterations = megatron_iterations("megatron_core012_llama.log")
    window, reason = megatron_window(iterations, skip_steps=2)
    assert reason is None and window.steps == 8  # iterations 3..10
    end = unix("2025-05-01 10:01:20") + 0.5
    length = sum(t for it, _, t in iterations if it > 2)
    assert window.end_unix == pytest.approx(end) and window.start_unix == pytest.approx(end - length)
    assert "iterations 3-10" in window.label and "mid-second" in window.label
    # The log's own window (lines of iterations 2 and 10) agrees with the summed times within a second.
    assert abs((unix("2025-05-01 10:01:20") - unix("2025-05-01 10:01:04")) - length) < 1.0


def test_energy_over_a_recorded_megatron_log_with_a_fake_counter() -> None:
    """The launcher's trace around the run of megatron_core012_llama.log: 8 GPUs at a constant 700 W."""
    iterations = megatron_iterations("megatron_core012_llama.log")
    window, _ = megatron_window(iterations, skip_steps=2)
    start = unix("2025-05-01 10:00:00")
    rows = [(start + k * 0.5, tuple(700.0 * k * 0.5 + g for g in range(8))) for k in range(200)]  # 100 s of trace
    metrics = window_power_metrics(trace_of(rows), window, tokens_per_step=64 * 8192, gpus_total=8)
    assert metrics.gpus_measured == 8 and metrics.reason is None
    assert metrics.avg_power_w_per_gpu == pytest.approx(700.0)
    # the readings nearest the window's ends are at most a quarter interval away
    assert metrics.duration_s == pytest.approx(window.end_unix - window.start_unix, abs=0.5)
    assert metrics.energy_j == pytest.approx(8 * 700.0 * metrics.duration_s)
    assert metrics.tokens == 8 * 64 * 8192 and metrics.window == window.label


def test_megatron_window_with_sub_second_stamps_uses_them_directly() -> None:
    window, reason = megatron_window(megatron_iterations("megatron_new_energy_qwen.log"), skip_steps=2)
    assert reason is None and "sub-second" in window.label and window.steps == 8
    assert window.start_unix == pytest.approx(parse_log_time("2025-09-01 12:00:04.246914")[0])


def test_megatron_window_without_stamps_or_measured_steps_says_why() -> None:
    window, reason = megatron_window(megatron_iterations("megatron_old_llama.log"), skip_steps=2)
    assert window is None and "no timestamps" in reason
    window, reason = megatron_window([(1, "2025-05-01 10:00:01", 1.0), (2, "2025-05-01 10:00:02", 1.0)], 2)
    assert window is None and "no measured" in reason


def test_monitor_window() -> None:
    window, reason = monitor_window(10.0, 20.0, 5)
    assert reason is None and (window.start_unix, window.end_unix, window.steps) == (10.0, 20.0, 5)
    assert monitor_window(None, 20.0, 5)[0] is None
    assert monitor_window(20.0, 10.0, 5)[0] is None


def test_open_trace_with_fake_libraries_never_touches_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    fake = FakeNvml(energy_mj=list(range(0, 10_000_000, 1000)))
    trace, reason = open_trace("nvd", 2, library=fake)
    assert reason is None and len(trace.counters) == 2 and fake.index_asked == 3
    assert trace.modulus_j == [2.0**64 / 1000.0] * 2
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    amd, _ = open_trace("amd", 1, library=FakeAmdSmi(ticks=[1000, 2000]))
    assert amd.modulus_j == [pytest.approx(2.0**64 * 15.3 / 1e6)]


def test_open_trace_without_counters_says_why() -> None:
    assert open_trace("cpu", 1)[0] is None and "cpu" in open_trace("cpu", 1)[1]
    trace, reason = open_trace("nvd", 1, library=FakeNvml(energy_mj=None))
    assert trace is None and "energy counter" in reason
