"""Log-analysis mode: a Megatron-LM or Primus training log -> one tprimat result, no GPU needed.

A thin command line over :func:`train.logs.build_result`, the same producer the
``mega`` and ``prim`` launchers use after a run; the workload comes from the
config (``config.env`` plus environment overrides).

CLI::

    python -m evaluate.extract LOG --platform amd --framework prim --model llama [--output FILE]

With ``PROFILE=tuned`` the workload is the vendor recipe's, as the launcher ran it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from train.logs import build_result
from train.profiles import ProfileError, apply_profile
from utils.configure import ConfigError, load_config
from utils.dataset import dataset_prefix, tokenizer_dir
from utils.fingerprint import fingerprint
from utils.hardware import gpu_info_for_device
from utils.models import get_shape
from utils.registry import FRAMEWORKS, model_names
from utils.result import ResultError, update_result, write_result

# The frameworks measured from their logs: their last rank prints the iteration lines (utils/registry.py).
LOG_FRAMEWORKS = tuple(key for key, framework in FRAMEWORKS.items() if framework.result_node == "last")
LOG_PLATFORMS = tuple(dict.fromkeys(p for key in LOG_FRAMEWORKS for p in FRAMEWORKS[key].platforms))
CAPTURED_BY = "log-analysis mode: variables and libraries are this machine's, not the training run's"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluate.extract",
        description="Turn a Megatron-LM or Primus training log into a unified tprimat result "
        "(log-analysis mode: no GPU needed; the workload comes from the config). "
        "Exit 0 when the result's status is ok, 1 when it is incomplete or failed, 2 on bad input.",
    )
    parser.add_argument("log", type=Path, help="the training log (stdout of the run, or Primus's TRAIN_LOG)")
    parser.add_argument("--platform", required=True, choices=LOG_PLATFORMS)
    parser.add_argument("--framework", required=True, choices=LOG_FRAMEWORKS)
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--output", type=Path, help="write the result here (atomically); default: print it")
    parser.add_argument("--returncode", type=int, default=None,
                        help="the run's exit code, if known (unknown: judged from the log alone)")
    parser.add_argument("--gpu-name", help="device the log came from, e.g. 'AMD Instinct MI300X', for the "
                        "peak FLOP/s and MFU (default: detect this machine's, usually none)")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"evaluate.extract: no such log file: {args.log}", file=sys.stderr)
        return 2
    try:  # PROFILE=tuned: the run's workload is its vendor recipe's (train/profiles/)
        cfg, profile = apply_profile(load_config(), args.platform, args.framework, args.model)
    except (ConfigError, ProfileError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    gpu = gpu_info_for_device(args.platform, args.gpu_name, cfg.world_size) if args.gpu_name else None
    shape = get_shape(args.model, cfg.model_size)
    result = build_result(
        cfg, log_path=args.log.resolve(), platform=args.platform, framework=args.framework, model=args.model,
        returncode=args.returncode, shape=shape, gpu_info=gpu, run_index=args.run_index,
        fingerprint=fingerprint(cfg, shape, dataset_prefix(cfg, args.model), tokenizer_dir(cfg, args.model)),
    )
    result.environment.captured_by = CAPTURED_BY
    update_result(result, profile_settings=profile.block())
    if gpu is not None:
        result.warnings.append(f"gpu_info from --gpu-name {args.gpu_name!r}, not detected")
    try:
        if args.output:
            write_result(args.output, result)
            print(f"evaluate.extract: {args.output} status={result.status}"
                  + (f" ({result.error})" if result.error else ""), file=sys.stderr)
        else:
            print(json.dumps(result.model_dump(mode="json"), indent=2, allow_nan=False))
    except (ResultError, OSError) as exc:
        print(f"evaluate.extract: {exc}", file=sys.stderr)
        return 2
    return 0 if result.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
