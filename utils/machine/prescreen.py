"""Prescreen of one GPU (about 30 s): how close is this device to its datasheet, and what is it?

``shell/gpu_check.sh`` runs it before the short training jobs, as MLPerf and the vendors' kits do: a bf16 GEMM sweep
and a device-memory copy against the datasheet (``utils/machine/hardware.py``), the device's facts, and the SM clock
sampled during the sweep, so a low peak says why (a device its own power cap explains is "ready, power-capped").
The arithmetic sees only a :class:`Device`, so tests drive it with a fake; the real one is :class:`TorchDevice`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from utils.io.atomic import atomic_write_text
from utils.machine.device_facts import IDLE_REASON, ClockReader, ClockSample, Fact, clock_reader, device_facts
from utils.machine.hardware import PLATFORMS, memory_bandwidth_tbs, peak_source, peak_tflops
from utils.machine.prescreen_record import ClockRecord, CopyBandwidth, GemmPoint, GemmSweep, Prescreen

GEMM_SIZES = (2048, 4096, 8192, 16384)
GEMM_TARGET_S = 4.0  # seconds of back-to-back multiplies per size: ~17 s for the sweep
COPY_BYTES = 1 << 30  # 1 GiB: far beyond every cache, so the copy runs at HBM speed
COPY_TARGET_S = 4.0
MAX_ITERATIONS = 100_000  # a tiny size on a fast device stops here rather than running for minutes
# Untimed runs before the sizing run: the first multiply of a shape pays cuBLAS's heuristics and the clock ramp (on an
# H200 the sizing runs were up to 3,300x slower without them, and 2048 was timed over 1.2 ms).
WARMUP_RUNS = 3
WARN_FRACTION = 0.80
GPU_PLATFORMS = ("nvd", "amd")
CLOCK_INTERVAL_S = 0.1  # the SM clock and its clock-event reasons, read this often during the GEMM sweep
# NVML's software power cap: a GEMM peak under WARN_FRACTION is "power-capped", not a warning, when this reason was
# active in CAPPED_SHARE of the best size's samples and the peak at the maximum SM clock reaches WARN_FRACTION (an H200
# at its 700 W cap ran ~1,500 of 1,980 MHz and measured 68% of the datasheet).
POWER_CAP_REASONS = ("sw_power_cap",)
CAPPED_SHARE = 0.5


class Device(Protocol):
    """The two timed operations the prescreen needs; seconds are device time, synchronized at both ends."""

    name: str

    def gemm_seconds(self, n: int, iterations: int) -> float: ...

    def copy_seconds(self, nbytes: int, iterations: int) -> float: ...


# ---------------------------------------------------------------------------
# the arithmetic


def gemm_tflops(n: int, iterations: int, seconds: float) -> float:
    """TFLOP/s of ``iterations`` ``n x n x n`` multiplies in ``seconds`` (a multiply-add is 2 FLOPs)."""
    return 2.0 * n**3 * iterations / seconds / 1e12


def copy_tbs(nbytes: int, iterations: int, seconds: float) -> float:
    """TB/s of ``iterations`` copies of ``nbytes``: each reads and writes the buffer once."""
    return 2.0 * nbytes * iterations / seconds / 1e12


def iterations_for(one_run_s: float, target_s: float) -> int:
    """How many back-to-back runs fill ``target_s``, given one run took ``one_run_s`` (at least 3)."""
    if one_run_s <= 0 or not math.isfinite(one_run_s):
        return MAX_ITERATIONS
    return max(3, min(MAX_ITERATIONS, math.ceil(target_s / one_run_s)))


def fraction(measured: float | None, datasheet: float | None) -> float | None:
    return measured / datasheet if measured is not None and datasheet else None


def gemm_sweep(device: Device, sizes: tuple[int, ...] = GEMM_SIZES, target_s: float = GEMM_TARGET_S,
               progress: Callable[[str], None] | None = None, watch: ClockWatch | None = None) -> GemmSweep:
    """Time each size (one untimed run warms up and sizes the loop), keep the best TFLOP/s as the peak;
    ``watch`` samples the clocks during each timed run, tagged with its size."""
    datasheet, reason = peak_tflops(device.name, "bf16")
    points = []
    for n in sizes:
        iterations = iterations_for(device.gemm_seconds(n, 1), target_s)
        if watch is not None:
            watch.mark(n)
        seconds = device.gemm_seconds(n, iterations)
        if watch is not None:
            watch.mark(None)
        point = GemmPoint(n=n, iterations=iterations, seconds=seconds, tflops=gemm_tflops(n, iterations, seconds))
        points.append(point)
        if progress:
            progress(f"GEMM bf16 {n}x{n}x{n}: {point.tflops:,.1f} TFLOP/s ({iterations} multiplies, {seconds:.2f} s)")
    best = max(points, key=lambda p: p.tflops) if points else None
    measured = best.tflops if best else None
    return GemmSweep(points=points, measured_peak_tflops=measured, best_n=best.n if best else None,
                     datasheet_tflops=datasheet, datasheet_source=peak_source(device.name),
                     fraction_of_datasheet=fraction(measured, datasheet), reason=reason)


def copy_bandwidth(device: Device, nbytes: int = COPY_BYTES, target_s: float = COPY_TARGET_S) -> CopyBandwidth:
    """Device-to-device copy bandwidth of ``nbytes`` buffers against the datasheet."""
    datasheet, source, reason = memory_bandwidth_tbs(device.name)
    iterations = iterations_for(device.copy_seconds(nbytes, 1), target_s)
    seconds = device.copy_seconds(nbytes, iterations)
    measured = copy_tbs(nbytes, iterations, seconds)
    return CopyBandwidth(bytes=nbytes, iterations=iterations, seconds=seconds, bytes_moved_per_copy=2 * nbytes,
                         measured_tbs=measured, datasheet_tbs=datasheet, datasheet_source=source,
                         fraction_of_datasheet=fraction(measured, datasheet), reason=reason)


def warnings_for(gemm: GemmSweep, copy: CopyBandwidth, threshold: float = WARN_FRACTION,
                 clocks: ClockRecord | None = None) -> list[str]:
    """The warning lines: a GEMM peak under ``threshold`` of the datasheet (with why, where the clocks say it;
    none when :func:`power_capped` explains it), and the copy likewise."""
    out = []
    if gemm.fraction_of_datasheet is not None and gemm.fraction_of_datasheet < threshold \
            and power_capped(gemm, clocks, threshold) is None:
        out.append(f"GEMM peak {gemm.measured_peak_tflops:,.0f} TFLOP/s is {gemm.fraction_of_datasheet:.0%} of the "
                   f"datasheet's {gemm.datasheet_tflops:,.0f} (under {threshold:.0%}): "
                   + (f"{clock_words(clocks)}; " if clocks is not None else "")
                   + "check clocks, power limit and thermals before benchmarking")
    if copy.fraction_of_datasheet is not None and copy.fraction_of_datasheet < threshold:
        out.append(f"copy bandwidth {copy.measured_tbs:.2f} TB/s is {copy.fraction_of_datasheet:.0%} of the "
                   f"datasheet's {copy.datasheet_tbs:.2f} TB/s (under {threshold:.0%})")
    return out


# ---------------------------------------------------------------------------
# the clocks during the sweep


class ClockWatch:
    """Samples a :class:`ClockReader` during the sweep's timed runs, each sample tagged with the size running. With
    ``interval_s`` a thread reads every ``interval_s`` (the timed loop waits on the device, so the thread runs); with
    None (tests: a fake reader) one sample is taken each time a size starts."""

    def __init__(self, reader: ClockReader, interval_s: float | None = CLOCK_INTERVAL_S) -> None:
        self.reader = reader
        self.interval_s = interval_s
        self.current: int | None = None
        self.samples: list[tuple[int, ClockSample]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClockWatch:
        if self.interval_s is not None:
            self._thread = threading.Thread(target=self._run, name="prescreen-clocks", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def mark(self, n: int | None) -> None:
        self.current = n
        if n is not None and self.interval_s is None:
            self._take()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        size = self.current
        if size is None:
            return
        try:
            sample = self.reader.read()
        except Exception:  # a failed read is one sample fewer; the record counts what was read
            return
        self.samples.append((size, sample))


def clock_record(samples: list[tuple[int, ClockSample]], library: str | None, gemm: GemmSweep,
                 facts: dict[str, Fact], why: str | None = None) -> ClockRecord:
    """The best size's clocks (all sizes' where it has none), the reasons' shares, and the peak at the max clock."""
    busy = [(n, sample) for n, sample in samples if IDLE_REASON not in (sample.reasons or ())]
    chosen = [sample for n, sample in busy if n == gemm.best_n] or [sample for _, sample in busy]
    during = gemm.best_n if any(n == gemm.best_n for n, _ in busy) else None
    clocks = [float(s.sm_mhz) for s in chosen if isinstance(s.sm_mhz, (int, float))]
    sustained = statistics.median(clocks) if clocks else None
    top = facts.get("sm_clock_max_mhz")
    maximum = float(top.value) if top is not None and isinstance(top.value, (int, float)) else None
    limit = facts.get("power_limit_w")
    power = float(limit.value) if limit is not None and isinstance(limit.value, (int, float)) else None
    read = [s for s in chosen if s.reasons is not None]
    shares = {name: sum(name in s.reasons for s in read) / len(read)
              for name in sorted({name for s in read for name in s.reasons})} if read else {}
    measured = gemm.measured_peak_tflops
    at_max = None
    reason = why
    if measured is not None and sustained and maximum:
        at_max = measured * maximum / sustained if sustained < maximum else measured
    elif reason is None:
        reason = ("no clock samples during the sweep" if not clocks else
                  "no maximum SM clock among the device's facts") + ": the peak at the max clock is unknown"
    if not read and reason is None:
        reason = next((s.why for s in chosen if s.why), "no clock-event reasons read")
    return ClockRecord(library=library, samples=len(chosen), during_n=during, sm_clock_sustained_mhz=sustained,
                       sm_clock_max_mhz=maximum, reasons=shares, power_limit_w=power, at_max_clock_tflops=at_max,
                       at_max_clock_fraction=fraction(at_max, gemm.datasheet_tflops), reason=reason)


def power_capped(gemm: GemmSweep, clocks: ClockRecord | None, threshold: float = WARN_FRACTION) -> float | None:
    """The power limit (W) that explains a GEMM peak under ``threshold``, or None: the device held its clock down
    for its power cap in most samples, and at the maximum clock the peak would reach ``threshold``."""
    if clocks is None or gemm.fraction_of_datasheet is None or gemm.fraction_of_datasheet >= threshold:
        return None
    capped = max((clocks.reasons.get(name, 0.0) for name in POWER_CAP_REASONS), default=0.0) >= CAPPED_SHARE
    if not capped or clocks.at_max_clock_fraction is None or clocks.at_max_clock_fraction < threshold:
        return None
    return clocks.power_limit_w if clocks.power_limit_w is not None else 0.0


def clock_words(clocks: ClockRecord) -> str:
    """The clocks during the sweep in words: sustained and max SM clock, the reasons, the peak at the max clock."""
    sustained = f"{clocks.sm_clock_sustained_mhz:,.0f}" if clocks.sm_clock_sustained_mhz is not None else "unknown"
    maximum = f"{clocks.sm_clock_max_mhz:,.0f}" if clocks.sm_clock_max_mhz is not None else "unknown"
    active = [f"{name} {share:.0%}" for name, share in clocks.reasons.items()]
    reasons = ", ".join(active) if active else ("none active" if clocks.reasons == {} and clocks.reason is None
                                                  else "not read")
    words = f"SM clock {sustained} MHz sustained of {maximum} max; clock-event reasons: {reasons}"
    if clocks.power_limit_w is not None:
        words += f"; power limit {clocks.power_limit_w:,.0f} W"
    if clocks.at_max_clock_tflops is not None:
        words += f"; at the max clock the peak would be {clocks.at_max_clock_tflops:,.0f} TFLOP/s"
        if clocks.at_max_clock_fraction is not None:
            words += f" = {clocks.at_max_clock_fraction:.0%} of the datasheet"
    if clocks.reason:
        words += f" ({clocks.reason})"
    return words


# ---------------------------------------------------------------------------
# the real device


class TorchDevice:
    """Logical device ``index`` through torch; the timed loops run between two device events."""

    def __init__(self, index: int = 0) -> None:
        import torch  # local: importing torch takes ~4.6 s on the 2-core host (-X importtime)

        self.torch = torch
        self.index = index
        self.device = torch.device("cuda", index)
        self.name = torch.cuda.get_device_name(index)
        self._gemm: dict[int, tuple[Any, Any, Any]] = {}
        self._copy: dict[int, tuple[Any, Any]] = {}

    def _timed(self, run: Callable[[], None], iterations: int) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        start.record()
        for _ in range(iterations):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0

    def gemm_seconds(self, n: int, iterations: int) -> float:
        if n not in self._gemm:
            self._gemm.clear()  # one size's buffers at a time
            self._copy.clear()
            make = self.torch.randn
            self._gemm[n] = tuple(make(n, n, device=self.device, dtype=self.torch.bfloat16) for _ in range(3))
            a, b, out = self._gemm[n]
            for _ in range(WARMUP_RUNS):  # untimed; _timed synchronizes before its start event
                self.torch.matmul(a, b, out=out)
        a, b, out = self._gemm[n]
        return self._timed(lambda: self.torch.matmul(a, b, out=out), iterations)

    def copy_seconds(self, nbytes: int, iterations: int) -> float:
        if nbytes not in self._copy:
            self._gemm.clear()
            self._copy.clear()
            src = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
            self._copy[nbytes] = (src, self.torch.empty_like(src))
            for _ in range(WARMUP_RUNS):
                self._copy[nbytes][1].copy_(src)
        src, dst = self._copy[nbytes]
        return self._timed(lambda: dst.copy_(src), iterations)


class NoGpu(RuntimeError):
    """The platform has no GPU this process can use (one line for the user)."""


def open_device(platform: str, index: int = 0) -> TorchDevice:
    if platform not in GPU_PLATFORMS:
        raise NoGpu(f"platform {platform} has no GPU to prescreen (use it on an nvd or amd node)")
    try:
        import torch  # local: importing torch takes ~4.6 s on the 2-core host (-X importtime)
    except ImportError as exc:
        raise NoGpu(f"torch is not installed ({exc}): no GPU to prescreen") from None
    if not torch.cuda.is_available() or torch.cuda.device_count() <= index:
        build = f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else (
            f"CUDA {torch.version.cuda}" if torch.version.cuda else "a cpu build")
        raise NoGpu(f"platform {platform} but torch {torch.__version__} ({build}) sees no GPU {index}: "
                    "nothing to prescreen")
    return TorchDevice(index)


def prescreen(platform: str, device: Device, facts: dict[str, Fact],
              progress: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
              clocks: tuple[ClockReader | None, str] | None = None,
              interval_s: float | None = CLOCK_INTERVAL_S) -> Prescreen:
    """Measure ``device`` (GEMM sweep, copy bandwidth) and put it beside ``facts``; ``clocks`` (a reader and its
    library, or None and why not) is sampled during the sweep, and a peak under the threshold says why."""
    started = clock()
    reader, library = clocks if clocks is not None else (None, "no clock reader given")
    watch = ClockWatch(reader, interval_s) if reader is not None else None
    with watch if watch is not None else contextlib.nullcontext():
        gemm = gemm_sweep(device, progress=progress, watch=watch)
    record = None
    if clocks is not None:
        record = clock_record(watch.samples if watch else [], library if reader else None, gemm, facts,
                              None if reader else library)
    copy = copy_bandwidth(device)
    if progress:
        progress(f"copy {copy.bytes / 1024**3:.0f} GiB: {copy.measured_tbs:.2f} TB/s ({copy.iterations} copies)")
    capped = power_capped(gemm, record)
    notes = []
    if capped is not None and record is not None:
        notes.append(f"ready, power-capped at {capped:,.0f} W: GEMM peak {gemm.measured_peak_tflops:,.0f} TFLOP/s "
                     f"is {gemm.fraction_of_datasheet:.0%} of the datasheet's {gemm.datasheet_tflops:,.0f}; "
                     f"{clock_words(record)}")
    return Prescreen(platform=platform, device_name=device.name,
                     measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     duration_s=max(0.0, clock() - started), gemm=gemm, copy_bandwidth=copy, facts=facts,
                     warnings=warnings_for(gemm, copy, clocks=record), clocks=record, power_capped_w=capped,
                     notes=notes)


def summary_lines(record: Prescreen) -> list[str]:
    """The lines printed after the measurement: peak and bandwidth against the datasheet, then the warnings."""
    gemm, copy = record.gemm, record.copy_bandwidth
    lines = []
    if gemm.datasheet_tflops is not None and gemm.fraction_of_datasheet is not None:
        lines.append(f"GEMM peak {gemm.measured_peak_tflops:,.1f} TFLOP/s = {gemm.fraction_of_datasheet:.1%} of the "
                     f"datasheet's {gemm.datasheet_tflops:,.1f} ({record.device_name})")
    else:
        lines.append(f"GEMM peak {gemm.measured_peak_tflops or 0:,.1f} TFLOP/s; {gemm.reason}")
    if copy.datasheet_tbs is not None and copy.fraction_of_datasheet is not None:
        lines.append(f"copy bandwidth {copy.measured_tbs:.2f} TB/s = {copy.fraction_of_datasheet:.1%} of the "
                     f"datasheet's {copy.datasheet_tbs:.2f} TB/s")
    else:
        lines.append(f"copy bandwidth {copy.measured_tbs:.2f} TB/s; {copy.reason}")
    gemm_low = gemm.fraction_of_datasheet is not None and gemm.fraction_of_datasheet < WARN_FRACTION
    if record.clocks is not None and gemm_low:
        lines.append(f"clocks during the sweep: {clock_words(record.clocks)}")
    lines += record.notes
    lines += [f"WARNING: {w}" for w in record.warnings]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.machine.prescreen",
        description="Prescreen GPU 0 (about 30 s): a bf16 GEMM sweep and a memory copy against the datasheet "
        "(utils/machine/hardware.py), and the device's facts (NVML / amdsmi). Writes the JSON record atomically. "
        f"A GEMM peak under {WARN_FRACTION:.0%} of the datasheet prints a warning. Exit 0 when measured, "
        "2 when there is no GPU or the input is bad.",
    )
    parser.add_argument("--platform", required=True, choices=PLATFORMS, help="the platform (nvd or amd)")
    parser.add_argument("--out", required=True, type=Path, help="where the JSON record goes")
    args = parser.parse_args(argv)
    try:
        device = open_device(args.platform)
    except NoGpu as exc:
        print(f"prescreen: {exc}", file=sys.stderr)
        return 2
    print(f"prescreen: {device.name}: GEMM sweep {', '.join(map(str, GEMM_SIZES))}, then a "
          f"{COPY_BYTES / 1024**3:.0f} GiB copy (~{GEMM_TARGET_S * len(GEMM_SIZES) + COPY_TARGET_S:.0f} s)", flush=True)
    record = prescreen(args.platform, device, device_facts(args.platform),
                       progress=lambda line: print(f"prescreen: {line}", flush=True),
                       clocks=clock_reader(args.platform))
    try:
        atomic_write_text(args.out, record.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        print(f"prescreen: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for line in summary_lines(record):
        print(f"prescreen: {line}")
    print(f"prescreen: written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
