"""Evaluation overhead of time to quality (issue 34): held-out evaluation time as a share of training time.

Optimizer steps and evaluation batches of a real ``tran`` trainer, timed in alternating blocks; the share at MLPerf's
cadence and the config's (method: docs/PERFORMANCE.md, "Time to quality"; goal <= 2%)::

    DATASET=sample MODEL_SIZE=tiny SL=256 MBS=4 GA=2 DP=1 GPUS_PER_NODE=1 \
        .venv/bin/python -m bench.eval_overhead --model llama        # --quick: one block of each
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.monitor_overhead import sync
from train.tran.step import Dist, Trainer
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.io.atomic import atomic_write_text
from utils.machine.hardware import cpu_name, detect_platform
from utils.spec.registry import model_names

MLPERF_INTERVAL, MLPERF_EVAL = 12288, 1024  # samples: MLPerf Training's Llama 3.1 8B evaluation cadence
GOAL_PERCENT = 2.0
QUICK = {"pairs": 1, "steps_per_block": 1, "warmup": 0}


def share(t_step: float, t_eval_batch: float, interval: int, eval_samples: int, gbs: int) -> float:
    """Evaluation time / (training + evaluation) time: ``eval_samples`` evaluated every ``interval`` samples."""
    evaluating = eval_samples / gbs * t_eval_batch
    return evaluating / (interval / gbs * t_step + evaluating)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Median seconds per training step and per evaluation batch, and the shares they give."""
    configured = load_config()
    cfg = configured
    if not cfg.evaluates:  # the bench needs a validation dataset of some size: one global batch per evaluation
        cfg = cfg.replace(eval_interval=cfg.gbs, eval_samples=cfg.gbs)
    platform = cfg.platform or detect_platform()
    device = torch.device("cpu") if platform == "cpu" else torch.device("cuda", 0)
    trainer = Trainer(cfg, args.model, Dist(0, 0, 1, device))
    evaluator = trainer.evaluator()
    steps, batches, index = [], [], 0
    for _ in range(args.warmup):
        trainer.step(index)
        index += 1
    for _ in range(args.pairs):
        for kind in ("step", "eval", "eval", "step"):  # ABBA: slow drift cancels
            sync(device)
            began = time.perf_counter()
            for _ in range(args.steps_per_block):
                if kind == "step":
                    trainer.step(index)
                    index += 1
                else:
                    evaluator.set_training(False)
                    with torch.no_grad():
                        evaluator.sums(lambda: False)  # never stopped: the bench times whole evaluations
                    evaluator.set_training(True)
            sync(device)
            per = (time.perf_counter() - began) / args.steps_per_block
            if kind == "step":
                steps.append(per)
            else:
                batches.append(per / cfg.eval_iters)  # one evaluation reads EVAL_ITERS global batches
    t_step, t_eval = statistics.median(steps), statistics.median(batches)
    figures: dict[str, Any] = {
        "machine": cpu_name() if device.type == "cpu" else torch.cuda.get_device_name(device),
        "platform": platform, "model": args.model, "gbs": cfg.gbs, "sl": cfg.sl,
        "layers": trainer.shape.num_layers, "median_step_s": t_step, "median_eval_batch_s": t_eval,
        "eval_to_step_ratio": t_eval / t_step,
        "mlperf_cadence_percent": 100 * share(t_step, t_eval, MLPERF_INTERVAL, MLPERF_EVAL, cfg.gbs),
        "blocks": {"pairs": args.pairs, "steps_per_block": args.steps_per_block, "warmup": args.warmup},
    }
    if configured.evaluates:
        figures["config_cadence_percent"] = 100 * share(t_step, t_eval, cfg.eval_interval, cfg.eval_samples, cfg.gbs)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=model_names(), default="llama")
    parser.add_argument("--pairs", type=int, default=4, help="step/eval/eval/step groups of blocks (default 4)")
    parser.add_argument("--steps-per-block", type=int, default=5, help="steps or eval batches per block (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured training steps first (default 2)")
    parser.add_argument("--quick", action="store_true", help=f"one block of each for the test suite ({QUICK})")
    parser.add_argument("--json", type=Path, help="also write the figures to this file (atomically)")
    args = parser.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    if min(args.pairs, args.steps_per_block) < 1 or args.warmup < 0:
        parser.error("--pairs and --steps-per-block must be >= 1, --warmup >= 0")
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda received, _frame: (print(f"eval_overhead: {signal.Signals(received).name}",
                                                              file=sys.stderr), sys.exit(128 + received)))
    try:
        figures = measure(args)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        print(f"eval_overhead: {exc}", file=sys.stderr)
        return 2
    lines = [f"median step {figures['median_step_s'] * 1e3:.1f} ms, median evaluation batch "
             f"{figures['median_eval_batch_s'] * 1e3:.1f} ms (ratio {figures['eval_to_step_ratio']:.3f}), "
             f"GBS {figures['gbs']}, SL {figures['sl']}, {figures['layers']} layers, {figures['machine']}",
             f"evaluation at MLPerf's cadence ({MLPERF_EVAL} samples every {MLPERF_INTERVAL}): "
             f"{figures['mlperf_cadence_percent']:.2f}% of the run (goal <= {GOAL_PERCENT}% on the 8-layer proxy)"]
    if "config_cadence_percent" in figures:
        lines.append(f"evaluation at the config's cadence: {figures['config_cadence_percent']:.2f}% of the run")
    print("\n".join(lines))
    if args.json:  # the figures as data, for a later comparison
        atomic_write_text(args.json, json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
