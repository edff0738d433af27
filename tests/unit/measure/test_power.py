"""utils/measure/power.py with fake NVML/amdsmi modules: energy counters first, the sampler as fallback, nulls."""

from __future__ import annotations

import itertools
import sys
import time

import pytest

from tests.helpers.devices import FakeAmdSmi, FakeNvml
from utils.machine.device_counters import open_reader
from utils.measure.power import (
    JOULES_PER_KWH,
    CounterWindow,
    DeviceEnergy,
    MeasuredWindow,
    PowerSampler,
    device_meter,
    integrate,
    log_power_metrics,
    power_metrics,
)


def test_trapezoid_integral_of_a_ramp() -> None:
    # 100 W rising linearly to 300 W over 10 s: exactly 2000 J, whatever the sample spacing.
    samples = [(t, 100.0 + 20.0 * t) for t in (0.0, 1.0, 2.5, 7.0, 10.0)]
    assert integrate(samples) == pytest.approx(2000.0)
    assert integrate(samples[:1]) == 0.0


def test_nvml_energy_counter_is_read_at_the_windows_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    # probe, start, stop: 5,000,000 mJ -> 5,600,000 mJ is 600 J
    fake = FakeNvml(energy_mj=[5_000_000, 5_000_000, 5_600_000])
    reader, reason = open_reader("nvd", 1, library=fake)
    assert reason is None and fake.index_asked == 5  # logical device 1 is physical GPU 5
    ticks = iter([10.0, 13.0])
    meter = device_meter(reader, clock=lambda: next(ticks))
    assert isinstance(meter, CounterWindow)
    meter.start()
    energy = meter.stop()
    assert energy.source == "energy_counter" and energy.method == "nvml nvmlDeviceGetTotalEnergyConsumption"
    assert energy.energy_j == pytest.approx(600.0) and energy.duration_s == 3.0
    assert energy.avg_power_w == pytest.approx(200.0) and energy.samples == 2


def test_amdsmi_energy_count_in_both_key_spellings() -> None:
    for key in ("energy_accumulator", "power"):
        reader, _ = open_reader("amd", 0, library=FakeAmdSmi([0, 1_000_000, 3_000_000], energy_key=key))
        clock = iter([0.0, 2.0]).__next__
        meter = device_meter(reader, clock=clock)
        meter.start()
        energy = meter.stop()
        assert energy.energy_j == pytest.approx(2_000_000 * 15.3 / 1e6), key  # 30.6 J
        assert energy.method == "amdsmi amdsmi_get_energy_count"


def test_without_a_counter_the_sampler_is_the_fallback() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())  # energy counter not supported
    assert isinstance(device_meter(reader), PowerSampler)
    reader, _ = open_reader("amd", 0, library=FakeAmdSmi())
    assert isinstance(device_meter(reader), PowerSampler)


def test_a_counter_that_goes_backwards_gives_no_energy() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml(energy_mj=[9_000, 9_000, 100]))  # driver reloaded
    meter = device_meter(reader)
    meter.start()
    assert meter.stop() is None


def test_sampler_with_fake_nvml_measures_constant_power() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml(milliwatts=350_000.0))
    ticks = itertools.count()
    sampler = PowerSampler(reader, interval_s=0.01, clock=lambda: next(ticks) * 0.5)  # fake 0.5 s per read
    sampler.start()
    time.sleep(0.1)
    energy = sampler.stop()
    assert energy is not None and energy.samples >= 3 and energy.source == "power_sampler"
    assert energy.duration_s == pytest.approx((energy.samples - 1) * 0.5)
    assert energy.avg_power_w == pytest.approx(350.0)
    assert energy.energy_j == pytest.approx(350.0 * energy.duration_s)  # energy = integral of P dt
    assert energy.method.startswith("nvml")


def test_sampler_thread_samples_at_least_once_a_second() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())
    sampler = PowerSampler(reader)  # default interval
    sampler.start()
    time.sleep(1.1)
    energy = sampler.stop()
    assert energy is not None and energy.samples / energy.duration_s >= 1.0
    with pytest.raises(ValueError, match=">= 1 Hz"):
        PowerSampler(reader, interval_s=1.5)


def test_amdsmi_reader_skips_unsupported_fields() -> None:
    reader, reason = open_reader("amd", 1, library=FakeAmdSmi())
    assert reason is None and reader.read_watts() == 612.0
    _, reason = open_reader("amd", 4, library=FakeAmdSmi())
    assert "lists 2 GPU(s)" in reason


def test_metrics_for_all_gpus_give_energy_and_tokens_per_kwh() -> None:
    devices = [DeviceEnergy("fake", samples=51, duration_s=10.0, energy_j=2000.0, avg_power_w=200.0),
               DeviceEnergy("fake", samples=51, duration_s=10.0, energy_j=3000.0, avg_power_w=300.0).as_dict()]
    out = power_metrics(devices, gpus_total=2, tokens=1_000_000)
    assert out.avg_power_w_per_gpu == 250.0 and out.per_gpu_avg_power_w == [200.0, 300.0]
    assert out.energy_j == 5000.0 and out.energy_kwh == pytest.approx(5000.0 / JOULES_PER_KWH)
    assert out.tokens_per_kwh == pytest.approx(1_000_000 / (5000.0 / 3.6e6))  # 7.2e8
    assert out.samples == 102 and out.sample_rate_hz == pytest.approx(5.1)
    assert out.gpus_measured == out.gpus_total == 2 and out.reason is None
    assert out.energy_source == "power_sampler"


def test_counter_figures_say_so() -> None:
    devices = [DeviceEnergy("nvml counter", 2, 10.0, 2000.0, 200.0, source="energy_counter")] * 2
    out = power_metrics(devices, gpus_total=2, tokens=1000)
    assert out.energy_source == "energy_counter" and out.sample_rate_hz is None
    assert "energy counter read at both ends" in out.method


def test_partial_gpus_keep_per_gpu_figures_but_no_totals() -> None:
    one = DeviceEnergy("fake", samples=11, duration_s=2.0, energy_j=800.0, avg_power_w=400.0)
    out = power_metrics([one, None], gpus_total=2, tokens=4096)
    assert out.avg_power_w_per_gpu == 400.0
    assert out.energy_j is None and out.tokens_per_kwh is None
    assert "only 1 of 2 GPUs measured" in out.reason


def test_measured_window_counts_only_post_warmup_tokens() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml(milliwatts=500_000.0))
    ticks = itertools.count()
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01, clock=lambda: next(ticks) * 0.1), None,
                            gpus_total=2, tokens_per_step=1000, warmup_steps=3)
    window.start()
    time.sleep(0.05)
    window.stop(steps_done=10, gather=lambda local: [local, local])  # two ranks, same readings
    out = window.metrics(10)
    assert out.tokens == 7 * 1000 and out.gpus_measured == 2
    assert out.avg_power_w_per_gpu == pytest.approx(500.0)
    assert out.tokens_per_kwh == pytest.approx(7000 / out.energy_kwh)
    assert "rank 0 gathers" in out.method


def test_measured_window_with_counters_on_every_gpu() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml(energy_mj=[0, 1_000_000, 4_600_000]))
    ticks = iter([0.0, 12.0])
    window = MeasuredWindow(device_meter(reader, clock=lambda: next(ticks)), None, gpus_total=2,
                            tokens_per_step=500, warmup_steps=2)
    window.start()
    window.stop(steps_done=8, gather=lambda local: [local, local])
    out = window.metrics(8)
    assert out.energy_source == "energy_counter" and out.energy_j == pytest.approx(2 * 3600.0)
    assert out.avg_power_w_per_gpu == pytest.approx(300.0) and out.tokens == 6 * 500
    assert out.energy_kwh == pytest.approx(0.002) and out.tokens_per_kwh == pytest.approx(3000 / 0.002)


def test_interrupted_window_reports_this_gpu_only() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01), None, gpus_total=4, tokens_per_step=10,
                            warmup_steps=0)
    window.start()
    time.sleep(0.03)
    out = window.metrics(steps_done=2)  # never stopped: the result is written after an interruption
    assert out.gpus_measured == 1 and out.energy_j is None and "only 1 of 4" in out.reason
    assert "not gathered" in out.method


def test_cpu_and_missing_libraries_give_nulls_with_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    window = MeasuredWindow.open("cpu", 0, gpus_total=1, tokens_per_step=10, warmup_steps=2)
    assert window.meter is None and "platform cpu" in window.reason
    out = window.metrics(12)
    figures = ("avg_power_w_per_gpu", "energy_j", "energy_kwh", "tokens_per_kwh", "samples", "method")
    assert all(getattr(out, key) is None for key in figures) and out.reason == window.reason
    assert out.energy_source == "none"
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    reader, reason = open_reader("nvd", 0)
    assert reader is None and "nvidia-ml-py (pynvml) is not installed" in reason
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    assert "amdsmi is not installed" in open_reader("amd", 0)[1]


def test_no_post_warmup_step_means_no_energy() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01), None, gpus_total=1, tokens_per_step=10,
                            warmup_steps=5)
    out = window.metrics(steps_done=3)  # stopped during warm-up: the meter never started
    assert out.energy_j is None and "no measured" in out.reason


def test_megatron_log_energy_fields() -> None:
    out = log_power_metrics([700.0, 710.0], [350.0, 355.0], [2.0, 2.0], world_size=8, tokens_per_step=1000)
    assert out.energy_source == "log" and out.energy_j == pytest.approx(1410.0 * 8)
    assert out.avg_power_w_per_gpu == pytest.approx(352.5) and out.tokens == 2000
    assert out.tokens_per_kwh == pytest.approx(2000 / (1410.0 * 8 / JOULES_PER_KWH))
    none = log_power_metrics([], [], [], world_size=8, tokens_per_step=1000)
    assert none.energy_j is None and "--log-energy" in none.reason and none.energy_source == "none"
