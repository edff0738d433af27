"""Power sampling arithmetic with fake NVML/amdsmi modules, and the honest nulls on cpu."""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

import pytest

from utils.power import (
    JOULES_PER_KWH,
    DeviceEnergy,
    MeasuredWindow,
    PowerSampler,
    integrate,
    open_reader,
    power_metrics,
)


class FakeNvml:
    """The pynvml calls utils.power makes; power in milliwatts as NVML reports it."""

    def __init__(self, milliwatts: float = 350_000.0) -> None:
        self.milliwatts = milliwatts
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


class FakeAmdSmi:
    def amdsmi_init(self) -> None:
        pass

    def amdsmi_get_processor_handles(self) -> list[str]:
        return ["gpu0", "gpu1"]

    def amdsmi_get_power_info(self, handle: str) -> dict[str, Any]:
        # MI300X-style: socket_power unsupported (N/A), current_socket_power populated.
        return {"socket_power": "N/A", "current_socket_power": 612, "average_socket_power": 0xFFFFFFFF}


def test_trapezoid_integral_of_a_ramp() -> None:
    # 100 W rising linearly to 300 W over 10 s: exactly 2000 J, whatever the sample spacing.
    samples = [(t, 100.0 + 20.0 * t) for t in (0.0, 1.0, 2.5, 7.0, 10.0)]
    assert integrate(samples) == pytest.approx(2000.0)
    assert integrate(samples[:1]) == 0.0


def test_sampler_with_fake_nvml_measures_constant_power(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    fake = FakeNvml(milliwatts=350_000.0)
    reader, reason = open_reader("nvd", 1, library=fake)
    assert reason is None and reader is not None
    assert fake.index_asked == 5  # logical device 1 is physical GPU 5
    ticks = itertools.count()
    sampler = PowerSampler(reader, interval_s=0.01, clock=lambda: next(ticks) * 0.5)  # fake 0.5 s per read
    sampler.start()
    time.sleep(0.1)
    energy = sampler.stop()
    assert energy is not None and energy.samples >= 3
    assert energy.duration_s == pytest.approx((energy.samples - 1) * 0.5)
    assert energy.avg_power_w == pytest.approx(350.0)
    assert energy.energy_j == pytest.approx(350.0 * energy.duration_s)  # energy = integral of P dt
    assert energy.method.startswith("nvml")


def test_sampler_thread_samples_at_least_once_a_second() -> None:
    fake = FakeNvml()
    reader, _ = open_reader("nvd", 0, library=fake)
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
    assert out["avg_power_w_per_gpu"] == 250.0 and out["per_gpu_avg_power_w"] == [200.0, 300.0]
    assert out["energy_j"] == 5000.0 and out["energy_kwh"] == pytest.approx(5000.0 / JOULES_PER_KWH)
    assert out["tokens_per_kwh"] == pytest.approx(1_000_000 / (5000.0 / 3.6e6))  # 7.2e8
    assert out["samples"] == 102 and out["sample_rate_hz"] == pytest.approx(5.1)
    assert out["gpus_measured"] == out["gpus_total"] == 2 and out["reason"] is None


def test_partial_gpus_keep_per_gpu_figures_but_no_totals() -> None:
    one = DeviceEnergy("fake", samples=11, duration_s=2.0, energy_j=800.0, avg_power_w=400.0)
    out = power_metrics([one, None], gpus_total=2, tokens=4096)
    assert out["avg_power_w_per_gpu"] == 400.0
    assert out["energy_j"] is None and out["tokens_per_kwh"] is None
    assert "only 1 of 2 GPUs measured" in out["reason"]


def test_measured_window_counts_only_post_warmup_tokens() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml(milliwatts=500_000.0))
    ticks = itertools.count()
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01, clock=lambda: next(ticks) * 0.1), None,
                            gpus_total=2, tokens_per_step=1000, warmup_steps=3)
    window.start()
    time.sleep(0.05)
    window.stop(steps_done=10, gather=lambda local: [local, local])  # two ranks, same readings
    out = window.metrics(10)
    assert out["tokens"] == 7 * 1000 and out["gpus_measured"] == 2
    assert out["avg_power_w_per_gpu"] == pytest.approx(500.0)
    assert out["tokens_per_kwh"] == pytest.approx(7000 / out["energy_kwh"])
    assert "rank 0 gathers" in out["method"]


def test_interrupted_window_reports_this_gpu_only() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01), None, gpus_total=4, tokens_per_step=10,
                            warmup_steps=0)
    window.start()
    time.sleep(0.03)
    out = window.metrics(steps_done=2)  # never stopped: the result is written after an interruption
    assert out["gpus_measured"] == 1 and out["energy_j"] is None and "only 1 of 4" in out["reason"]
    assert "not gathered" in out["method"]


def test_cpu_and_missing_libraries_give_nulls_with_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    reader, reason = open_reader("cpu", 0)
    assert reader is None and "platform cpu" in reason
    out = MeasuredWindow(None, reason, gpus_total=1, tokens_per_step=10, warmup_steps=2).metrics(12)
    figures = ("avg_power_w_per_gpu", "energy_j", "energy_kwh", "tokens_per_kwh", "samples", "method")
    assert all(out[key] is None for key in figures) and out["reason"] == reason
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    reader, reason = open_reader("nvd", 0)
    assert reader is None and "nvidia-ml-py (pynvml) is not installed" in reason
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    assert "amdsmi is not installed" in open_reader("amd", 0)[1]


def test_no_post_warmup_step_means_no_power() -> None:
    reader, _ = open_reader("nvd", 0, library=FakeNvml())
    window = MeasuredWindow(PowerSampler(reader, interval_s=0.01), None, gpus_total=1, tokens_per_step=10,
                            warmup_steps=5)
    out = window.metrics(steps_done=3)  # stopped during warm-up: the sampler never started
    assert out["energy_j"] is None and "no measured" in out["reason"]
