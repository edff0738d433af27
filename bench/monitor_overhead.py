"""Overhead of tprimat's step measurement on a real tiny ``tran`` training loop.

"On" is what the loop adds around its optimizer steps (``StepMonitor`` and the energy meter), "off" the bare
``Trainer.step`` loop, in alternating on/off/off/on blocks so slow drift cancels. Target: <= 0.1% of step time::

    DATASET=sample MODEL_SIZE=tiny SL=256 MBS=4 GA=2 DP=1 GPUS_PER_NODE=1 \
        .venv/bin/python -m bench.monitor_overhead --model llama     # --quick: the test suite's few blocks
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evaluate.analysis.stats import estimate
from train.rules.schedule import lr_at
from train.tran.step import Dist, Trainer
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.io.atomic import atomic_write_text
from utils.machine.device_counters import open_reader
from utils.machine.hardware import cpu_name, detect_platform
from utils.measure.monitor import StepMonitor
from utils.measure.power import CounterWindow, device_meter
from utils.spec.registry import model_names

PATTERN = ("on", "off", "off", "on")
TARGET_PERCENT = 0.1
QUICK = {"quads": 3, "steps_per_block": 2, "warmup": 1, "direct_repeats": 2000}


class SyntheticReader:
    """A power reader that returns a constant: measures the sampler thread's cost where no sensor exists."""

    method = "synthetic constant (thread cost only, not a power measurement)"

    def read_watts(self) -> float:
        return 0.0


def meter_method(reader: Any) -> str:
    """What the 'on' blocks run: the device's energy counter, or the sampler thread on its power reader."""
    meter = device_meter(reader)
    return meter.counter.counter_method if isinstance(meter, CounterWindow) else reader.method


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_block(trainer: Trainer, mode: str, first_step: int, steps: int, reader: Any) -> float:
    """Seconds for ``steps`` optimizer steps, monitored or bare, timed from outside."""
    device, cfg = trainer.dist_info.device, trainer.cfg
    sync(device)
    started = time.perf_counter()
    if mode == "off":
        for index in range(first_step, first_step + steps):
            trainer.step(index)
    else:
        monitor = StepMonitor(device if device.type == "cuda" else None)
        meter = device_meter(reader) if reader is not None else None
        monitor.start_window()
        if meter:
            meter.start()
        for index in range(first_step, first_step + steps):
            monitor.start_step()
            loss = trainer.step(index)
            monitor.end_step(loss=loss, lr=lr_at(index, cfg))
            monitor.drain()
        monitor.finish()
        if meter:
            meter.stop()
    sync(device)
    return time.perf_counter() - started


def direct_cost(device: torch.device, repeats: int) -> float:
    """Seconds per step of the monitor calls alone (start, end with the loss, lagged read), no training between."""
    monitor = StepMonitor(device if device.type == "cuda" else None)
    loss = torch.ones((), device=device)
    monitor.start_window()
    started = time.perf_counter()
    for _ in range(repeats):
        monitor.start_step()
        monitor.end_step(loss=loss, lr=1e-3)
        monitor.drain()
    monitor.finish()
    return (time.perf_counter() - started) / repeats


def measure(args: argparse.Namespace) -> dict[str, Any]:
    cfg = load_config()
    plat = detect_platform()
    device = torch.device("cuda", 0) if plat != "cpu" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    trainer = Trainer(cfg, args.model, Dist(0, 0, 1, device))
    reader, power_reason = open_reader(plat, 0)
    if reader is None and args.synthetic_sampler:
        reader, power_reason = SyntheticReader(), None
    step = 0
    for _ in range(args.warmup):
        trainer.step(step)
        step += 1
    per_step: dict[str, list[float]] = {"on": [], "off": []}
    quads: list[float] = []
    for quad in range(args.quads):
        times: dict[str, list[float]] = {"on": [], "off": []}
        for mode in PATTERN:
            seconds = run_block(trainer, mode, step, args.steps_per_block, reader) / args.steps_per_block
            step += args.steps_per_block
            times[mode].append(seconds)
            per_step[mode].append(seconds)
        quads.append(statistics.fmean(times["on"]) - statistics.fmean(times["off"]))
        print(f"quad {quad + 1}/{args.quads}: on {statistics.fmean(times['on']) * 1e3:.2f} ms/step, "
              f"off {statistics.fmean(times['off']) * 1e3:.2f} ms/step", file=sys.stderr, flush=True)
    step_off = statistics.median(per_step["off"])
    overhead = statistics.fmean(quads)
    spread = estimate(quads)  # mean +- t * standard error; one quad: no width
    low, high = (spread.low, spread.high) if spread and spread.has_interval else (overhead, overhead)
    direct = direct_cost(device, args.direct_repeats)
    return {
        "command": " ".join([os.path.basename(sys.executable), "-m", "bench.monitor_overhead", *sys.argv[1:]]),
        "machine": {"platform": plat, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else
                    None, "cpu": cpu_name(), "cpus": os.cpu_count(),
                    "torch_threads": torch.get_num_threads(), "load_avg_1min": os.getloadavg()[0],
                    "torch": torch.__version__},
        "workload": {"model": args.model, "model_size": cfg.model_size, "sl": cfg.sl, "mbs": cfg.mbs, "ga": cfg.ga,
                     "precision": trainer.precision_detail, "params": trainer.shape.parameter_count()},
        "power_sampler": (f"running in 'on' blocks ({meter_method(reader)})" if reader
                          else f"not running: {power_reason}"),
        "timer": "device events, read lagged" if device.type == "cuda" else "host clock (cpu)",
        "quick": args.quick,
        "blocks": {"quads": args.quads, "steps_per_block": args.steps_per_block, "pattern": "/".join(PATTERN)},
        "median_step_s": {"off": step_off, "on": statistics.median(per_step["on"])},
        "overhead_per_step_s": overhead,
        "overhead_95ci_s": [low, high],
        "overhead_percent": 100 * overhead / step_off,
        "overhead_percent_95ci": [100 * low / step_off, 100 * high / step_off],
        "direct_monitor_cost_s": direct,
        "direct_monitor_cost_percent": 100 * direct / step_off,
        "target_percent": TARGET_PERCENT,
    }


def verdict(figures: dict[str, Any]) -> str:
    if figures["quick"]:
        return "not judged (--quick: too few blocks)"
    low, high = figures["overhead_percent_95ci"]
    if high <= TARGET_PERCENT:
        return "met (the whole 95% interval is below the target)"
    if low > TARGET_PERCENT:
        return "NOT met (the whole 95% interval is above the target)"
    return "inconclusive from the A/B blocks (interval spans the target); see the direct cost"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.monitor_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=model_names(), default="llama")
    parser.add_argument("--quads", type=int, default=8, help="on/off/off/on groups of blocks (default 8)")
    parser.add_argument("--steps-per-block", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured steps first")
    parser.add_argument("--synthetic-sampler", action="store_true",
                        help="where no power sensor exists (cpu), run the sampler thread on a constant reader "
                             "so its cost is included")
    parser.add_argument("--direct-repeats", type=int, default=20000,
                        help="monitor-only cycles timed for the direct cost (default 20000)")
    parser.add_argument("--quick", action="store_true",
                        help=f"a few tiny blocks for the test suite ({QUICK}); too few figures to judge the target")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    if min(args.quads, args.steps_per_block, args.direct_repeats) < 1 or args.warmup < 0:
        parser.error("--quads, --steps-per-block and --direct-repeats must be >= 1, --warmup >= 0")
    try:
        figures = measure(args)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        print(f"monitor_overhead: {exc}", file=sys.stderr)
        return 2
    ms = figures["median_step_s"]
    low, high = figures["overhead_percent_95ci"]
    print(f"step time, median: monitor off {ms['off'] * 1e3:.3f} ms, on {ms['on'] * 1e3:.3f} ms")
    print(f"overhead per step: {figures['overhead_per_step_s'] * 1e6:.1f} us = {figures['overhead_percent']:.3f}% "
          f"(95% interval {low:.3f}% .. {high:.3f}%)")
    print(f"monitor calls alone: {figures['direct_monitor_cost_s'] * 1e6:.2f} us per step = "
          f"{figures['direct_monitor_cost_percent']:.4f}% of the step")
    print(f"power sampler: {figures['power_sampler']}")
    print(f"timer: {figures['timer']}")
    print(f"target <= {TARGET_PERCENT}%: {verdict(figures)}")
    if args.json:
        atomic_write_text(args.json, json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
