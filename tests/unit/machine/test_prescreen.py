"""The prescreen's arithmetic (utils/machine/prescreen.py) with a fake device on cpu, its facts with a fake NVML,
its refusals.

The fake device answers each timed operation with the time a device of a given speed would take
(``work / rate``), so the expected TFLOP/s and TB/s are the rates the test chose; nothing here is a
measured figure.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers.devices import H100, FakeDevice, h100
from utils.machine import device_facts as df
from utils.machine import prescreen as ps
from utils.machine.hardware import memory_bandwidth_tbs, peak_tflops
from utils.machine.prescreen_record import Prescreen


def test_gemm_sweep_peak_is_the_best_size_against_the_datasheet():
    device = h100(peak=798.0)
    sweep = ps.gemm_sweep(device)
    assert [p.n for p in sweep.points] == list(ps.GEMM_SIZES)
    for point in sweep.points:
        assert point.tflops == pytest.approx(device.tflops[point.n])
    assert sweep.measured_peak_tflops == pytest.approx(798.0)
    assert sweep.best_n == 8192
    assert sweep.datasheet_tflops == peak_tflops(H100, "bf16")[0] == pytest.approx(989.4)
    assert sweep.fraction_of_datasheet == pytest.approx(798.0 / 989.4)
    assert "H100 SXM" in sweep.datasheet_source


def test_each_size_is_warmed_then_timed_for_the_target():
    device = h100()
    ps.gemm_sweep(device, sizes=(8192,), target_s=2.0)
    (warm, timed) = device.calls
    assert warm == ("gemm", 8192, 1)
    one = 2 * 8192**3 / (798.0 * 1e12)
    assert timed[2] == pytest.approx(2.0 / one, abs=1)  # ceil(target / one run)


def test_iterations_for_bounds():
    assert ps.iterations_for(1.0, 4.0) == 4
    assert ps.iterations_for(10.0, 4.0) == 3  # a slow run is still repeated
    assert ps.iterations_for(1e-9, 4.0) == ps.MAX_ITERATIONS
    assert ps.iterations_for(0.0, 4.0) == ps.MAX_ITERATIONS


def test_copy_counts_a_read_and_a_write():
    device = h100(tbs=2.9)
    copy = ps.copy_bandwidth(device, nbytes=1 << 20, target_s=0.5)
    assert copy.measured_tbs == pytest.approx(2.9)
    assert copy.bytes_moved_per_copy == 2 << 20
    assert copy.datasheet_tbs == memory_bandwidth_tbs(H100)[0] == 3.35
    assert copy.fraction_of_datasheet == pytest.approx(2.9 / 3.35)


def test_formulas():
    assert ps.gemm_tflops(1000, 1, 2e-3) == pytest.approx(1.0)  # 2e9 FLOPs in 2 ms
    assert ps.copy_tbs(10**12, 1, 2.0) == pytest.approx(1.0)  # 2 TB moved in 2 s


def test_a_node_under_80_percent_gets_a_warning_line():
    slow = ps.prescreen("nvd", h100(peak=700.0), {}, clock=iter([0.0, 31.0]).__next__)
    assert slow.duration_s == 31.0
    assert len(slow.warnings) == 1 and "GEMM peak 700 TFLOP/s is 71%" in slow.warnings[0]
    assert any(line.startswith("WARNING: GEMM peak") for line in ps.summary_lines(slow))
    fine = ps.prescreen("nvd", h100(peak=798.0), {})
    assert fine.warnings == []  # 798 of 989.4 is 80.7%


def test_slow_copy_is_warned_too():
    record = ps.prescreen("nvd", h100(peak=900.0, tbs=2.0), {})
    assert [w for w in record.warnings if w.startswith("copy bandwidth 2.00 TB/s is 60%")]


def test_unknown_device_has_no_datasheet_and_says_why():
    device = FakeDevice("Mystery Accelerator 9000", {n: 100.0 for n in ps.GEMM_SIZES}, 1.0)
    record = ps.prescreen("nvd", device, {})
    assert record.gemm.datasheet_tflops is None and record.gemm.fraction_of_datasheet is None
    assert "not in the peak table" in record.gemm.reason
    assert record.copy_bandwidth.datasheet_tbs is None and "bandwidth table" in record.copy_bandwidth.reason
    assert record.warnings == []
    assert Prescreen.model_validate_json(record.model_dump_json()) == record


class NotSupported(Exception):
    pass


class FakeNvml:
    """The NVML calls the prescreen makes, for one device; ECC unsupported (as on consumer boards)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, NVML_TEMPERATURE_GPU = 1, 0, 0

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlSystemGetDriverVersion(self):
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 12080

    def nvmlDeviceGetMemoryInfo(self, handle):
        return type("Memory", (), {"total": 80 * 1024**3})()

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000

    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {1: 1980, 2: 2619}[kind]

    def nvmlDeviceGetMaxClockInfo(self, handle, kind):
        return {1: 1980, 2: 2619}[kind]

    def nvmlDeviceGetEccMode(self, handle):
        raise NotSupported("Not Supported")

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        raise NotSupported("Not Supported")

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 41


def test_nvml_facts_and_unreadable_ones_are_null_with_the_reason():
    facts = df.device_facts("nvd", 0, FakeNvml())
    assert facts["model"].value == "NVIDIA H100 80GB HBM3"
    assert facts["driver"].value == "570.86.15"
    assert facts["driver_cuda_version"].value == "12.8"
    assert facts["memory_total_gib"].value == 80.0
    assert facts["power_limit_w"].value == 700.0
    assert facts["sm_clock_max_mhz"].value == 1980
    assert facts["ecc_enabled"].value is None
    assert facts["ecc_enabled"].reason == "nvidia-ml-py: NotSupported: Not Supported"
    assert facts["runtime"].value is None and "cpu build" in facts["runtime"].reason  # this venv's torch


def test_no_library_gives_every_fact_null_with_the_reason():
    class Broken:
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    facts = df.device_facts("nvd", 0, Broken())
    assert set(df.FACT_NAMES) <= set(facts)
    assert all(facts[name].value is None and "libnvidia-ml.so.1" in facts[name].reason for name in df.FACT_NAMES)


@pytest.mark.parametrize("platform, words", [("cpu", "platform cpu has no GPU"), ("nvd", "sees no GPU 0")])
def test_no_gpu_is_one_line_and_exit_2(tmp_path, capsys, platform, words):
    out = tmp_path / "prescreen.json"
    assert ps.main(["--platform", platform, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not out.exists()


def test_written_record_reads_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ps, "open_device", lambda platform: h100())
    monkeypatch.setattr(ps, "device_facts", lambda platform: df.device_facts(platform, 0, FakeNvml()))
    out = tmp_path / "check" / "prescreen.json"
    assert ps.main(["--platform", "nvd", "--out", str(out)]) == 0
    record = Prescreen.model_validate(json.loads(out.read_text()))
    assert record.gemm.measured_peak_tflops == pytest.approx(798.0)
    assert "80.7% of the datasheet's 989.4" in capsys.readouterr().out


class FakeTorch:
    """The few ``torch`` calls :class:`utils.machine.prescreen.TorchDevice` makes; ``log`` records the work's order."""

    bfloat16, uint8 = "bf16", "u8"

    def __init__(self) -> None:
        self.log: list[str] = []
        log = self.log

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                pass

            def record(self) -> None:
                log.append("event")

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, other: object) -> float:
                return 1.0

        class Buffer:
            def copy_(self, src: object) -> None:
                log.append("copy")

        class Cuda:
            @staticmethod
            def get_device_name(index: int) -> str:
                return H100

            @staticmethod
            def synchronize(device: object) -> None:
                log.append("sync")

        Cuda.Event = Event
        self.cuda, self.buffer = Cuda, Buffer

    def device(self, kind: str, index: int) -> tuple[str, int]:
        return (kind, index)

    def randn(self, *shape: int, device: object, dtype: object) -> object:
        return self.buffer()

    def empty(self, nbytes: int, dtype: object, device: object) -> object:
        return self.buffer()

    def empty_like(self, src: object) -> object:
        return self.buffer()

    def matmul(self, a: object, b: object, out: object) -> None:
        self.log.append("matmul")


def test_torch_device_warms_each_size_before_its_sizing_run(monkeypatch):
    # On an H200 the first, cold multiply of a shape sized the loop: 2048 was timed over 46 multiplies (1.2 ms).
    fake = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    device = ps.TorchDevice(0)
    device.gemm_seconds(2048, 1)  # the sizing run
    device.gemm_seconds(2048, 5)  # the timed loop: the size is warm already
    warm = ["matmul"] * ps.WARMUP_RUNS
    assert fake.log == [*warm, "sync", "event", "matmul", "event", "sync", "event", *(["matmul"] * 5), "event"]
    fake.log.clear()
    device.copy_seconds(1024, 1)
    device.copy_seconds(1024, 2)
    assert fake.log == ["copy"] * ps.WARMUP_RUNS + ["sync", "event", "copy", "event", "sync", "event", "copy", "copy",
                                                    "event"]


# ---------------------------------------------------------------------------
# issue 38: the clocks during the sweep say why a peak is low


class FakeClocks:
    """A clock reader whose SM clock and clock-event reasons are the test's (nothing measured)."""

    library = "nvidia-ml-py"

    def __init__(self, mhz: float, reasons: tuple[str, ...] | None, why: str | None = None) -> None:
        self.sample = df.ClockSample(mhz, reasons, why)

    def read(self) -> df.ClockSample:
        return self.sample


def _facts(power_w: float = 700.0, max_mhz: int = 1980) -> dict[str, df.Fact]:
    return {"power_limit_w": df.Fact(value=power_w), "sm_clock_max_mhz": df.Fact(value=max_mhz)}


def test_a_power_capped_device_is_ready_power_capped_not_a_warning():
    """The H200 of 2026-11-26 in numbers: the SM clock held at 1,500 of 1,980 MHz by the 700 W cap."""
    reader = FakeClocks(1500, ("sw_power_cap",))
    record = ps.prescreen("nvd", h100(peak=672.0), _facts(), clocks=(reader, "nvidia-ml-py"), interval_s=None)
    clocks = record.clocks
    assert clocks.samples == 1 and clocks.during_n == 8192  # one sample per size here, the best size's
    assert clocks.sm_clock_sustained_mhz == 1500 and clocks.sm_clock_max_mhz == 1980
    assert clocks.reasons == {"sw_power_cap": 1.0} and clocks.power_limit_w == 700.0
    assert clocks.at_max_clock_tflops == pytest.approx(672.0 * 1980 / 1500)
    assert clocks.at_max_clock_fraction == pytest.approx(672.0 * 1980 / 1500 / 989.4)
    assert record.warnings == [] and record.power_capped_w == 700.0
    lines = ps.summary_lines(record)
    assert any(line.startswith("ready, power-capped at 700 W: GEMM peak 672 TFLOP/s is 68%") for line in lines)
    assert any("SM clock 1,500 MHz sustained of 1,980 max; clock-event reasons: sw_power_cap 100%" in line
               and "would be 887 TFLOP/s = 90% of the datasheet" in line for line in lines)
    assert Prescreen.model_validate_json(record.model_dump_json()) == record


def test_a_thermal_slowdown_or_a_low_peak_at_full_clock_stays_a_warning_with_the_reason():
    hot = ps.prescreen("nvd", h100(peak=672.0), _facts(), clocks=(FakeClocks(1500, ("hw_thermal_slowdown",)),
                                                                   "nvidia-ml-py"), interval_s=None)
    assert hot.power_capped_w is None and len(hot.warnings) == 1
    assert "clock-event reasons: hw_thermal_slowdown 100%" in hot.warnings[0]
    slow = ps.prescreen("nvd", h100(peak=600.0), _facts(), clocks=(FakeClocks(1900, ("sw_power_cap",)),
                                                                    "nvidia-ml-py"), interval_s=None)
    assert slow.power_capped_w is None and "would be 625 TFLOP/s = 63% of the datasheet" in slow.warnings[0]


def test_idle_samples_are_left_out_and_an_unreadable_reader_says_why():
    idle = ps.prescreen("nvd", h100(peak=672.0), _facts(), clocks=(FakeClocks(345, ("gpu_idle",)), "nvidia-ml-py"),
                        interval_s=None)
    assert idle.clocks.samples == 0 and idle.clocks.sm_clock_sustained_mhz is None
    assert "no clock samples" in idle.clocks.reason and idle.power_capped_w is None and len(idle.warnings) == 1
    none = ps.prescreen("nvd", h100(peak=672.0), _facts(), clocks=(None, "cannot read the clocks of device 0: x"))
    assert none.clocks.library is None and none.clocks.reason == "cannot read the clocks of device 0: x"
    fine = ps.prescreen("nvd", h100(peak=900.0), _facts(), clocks=(FakeClocks(1980, ()), "nvidia-ml-py"),
                        interval_s=None)
    assert fine.warnings == [] and fine.power_capped_w is None and fine.clocks.reasons == {}
    assert not any(line.startswith("clocks during") for line in ps.summary_lines(fine))  # said only beside a low peak


def test_the_thread_samples_while_a_size_runs():
    import time

    class Slow(type(h100())):
        def gemm_seconds(self, n, iterations):
            time.sleep(0.03)
            return super().gemm_seconds(n, iterations)

    device = h100(peak=672.0)
    slow = Slow(device.name, device.tflops, device.tbs)
    record = ps.prescreen("nvd", slow, _facts(), clocks=(FakeClocks(1500, ("sw_power_cap",)), "nvidia-ml-py"),
                          interval_s=0.005)
    assert record.clocks.samples >= 1 and record.power_capped_w == 700.0


class FakeNvmlClocks(FakeNvml):
    def nvmlDeviceGetClockInfo(self, handle, kind):
        return {1: 1500, 2: 2619}[kind]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 | 0x1000


def test_nvml_clock_reasons_are_decoded_by_name():
    reader, library = df.clock_reader("nvd", 0, FakeNvmlClocks())
    assert library == "nvidia-ml-py"
    assert reader.read() == df.ClockSample(1500, ("sw_power_cap", "unknown_0x1000"))
    older = FakeNvml()  # no reasons call at all: the clock still reads, the reasons say why not
    sample = df.clock_reader("nvd", 0, older)[0].read()
    assert sample.sm_mhz == 1980 and sample.reasons is None
    assert "no nvmlDeviceGetCurrentClocksEventReasons" in sample.why
    assert df.decode_reasons(0x1 | 0x40 | 0x80) == ("gpu_idle", "hw_thermal_slowdown", "hw_power_brake_slowdown")


def test_the_checks_verdict_says_power_capped():
    from evaluate.gpu_check.check import verdict_of

    assert verdict_of([], [], 700.0) == ("ready", verdict_of([], [], 700.0)[1])
    assert verdict_of([], [], 700.0)[1].startswith("ready, power-capped at 700 W: ")
    assert verdict_of([], [])[1].startswith("ready: ") and verdict_of(["x"], [], 700.0)[0] == "degraded"
