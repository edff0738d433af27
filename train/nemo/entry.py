"""The ``nemo`` training entry: one process per GPU under torchrun, inside the NeMo image.

``nemo_run.run(recipe, direct=True)`` is ``fdl.build(recipe)()`` in nemo-run 0.4 (``run/task.py: direct_run_fn``);
tprimat does the two steps itself to append its callback to the *built* trainer (fiddle copies configured values
while building).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

from train.nemo.callback import EvaluationRecorder, LightningMeasurement, benchmark_callback_class
from train.nemo.plugin import FRAMEWORK, PLATFORM, nemo_env, overrides_for
from train.nemo.recipe import NemoOverrides
from train.profiles import ProfileError, apply_profile
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.dataset.fingerprint import fingerprint
from utils.dataset.paths import job_data, missing_files
from utils.machine.hardware import collect_gpu_info
from utils.measure.power import MeasuredWindow
from utils.result.file import Interrupted, new_result, update_result
from utils.result.step_log import StepLog, step_log_path
from utils.schema.measures import Source
from utils.spec.models import workload_shape
from utils.spec.registry import model_names

# NeMo's TimingCallback logs this per step without synchronizing the device; recorded beside ours.
NEMO_STEP_TIME_KEY = "train_step_timing in s"
NEMO_STEP_TIME_LABEL = "NeMo TimingCallback (clock read without device synchronize)"


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def build_value(value: Any, run: Any) -> Any:
    """Turn the override data into NeMo-Run configs (``_target_`` dicts), recursively."""
    if isinstance(value, list):
        return [build_value(v, run) for v in value]
    if isinstance(value, dict) and "_target_" in value:
        kwargs = {k: build_value(v, run) for k, v in value.items() if k not in ("_target_", "_call_")}
        target = _resolve(value["_target_"])
        if value.get("_call_") == "factory":
            return target(**kwargs)
        if value.get("_call_") == "member":  # an enum member by name, e.g. AttnBackend.fused
            return getattr(target, kwargs["name"])
        return run.Config(target, **kwargs)
    if isinstance(value, dict):
        return {k: build_value(v, run) for k, v in value.items()}
    return value


def apply_overrides(recipe: Any, overrides: NemoOverrides, run: Any) -> None:
    """Set every ``a.b.c`` field on the recipe; an unknown path is an error, never skipped."""
    for path, value in overrides.fields.items():
        *parents, leaf = path.split(".")
        node = recipe
        for name in parents:
            node = getattr(node, name)
        setattr(node, leaf, build_value(value, run))


def build_recipe(overrides: NemoOverrides) -> Any:
    # NeMo's image only: nemo_run, fiddle, Lightning, Megatron are not in the launcher's Python
    import nemo_run as run

    recipe = _resolve(overrides.recipe)(**overrides.recipe_kwargs)
    apply_overrides(recipe, overrides, run)
    return recipe


def reseed(seed: int) -> None:
    """What NeMo 2.3 does at start-up with its fixed seed 1234, with SEED instead (model init, dropout)."""
    # NeMo's image only (torch: 4.8 s to import, python -X importtime; `--help` runs without it)
    import numpy as np
    import torch
    from megatron.core import parallel_state, tensor_parallel

    value = seed + 100 * parallel_state.get_pipeline_model_parallel_rank()
    random.seed(value)
    np.random.seed(value % 2**32)
    torch.manual_seed(value)
    if torch.cuda.device_count() > 0:
        tensor_parallel.model_parallel_cuda_manual_seed(value)


def seed_callback(seed: int) -> Any:
    # NeMo's image only
    from lightning.pytorch.callbacks import Callback

    class ReseedCallback(Callback):
        """Lightning calls ``setup`` after the process groups exist and before the model is built."""

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            reseed(seed)

    return ReseedCallback()


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


def train(args: argparse.Namespace) -> int:
    """Build the recipe with the overrides, attach the callback, train; 0 when the result says ok."""
    cfg, profile = apply_profile(load_config(), PLATFORM, FRAMEWORK, args.model)
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    data = job_data(cfg, args.model)
    if args.overrides:
        overrides = NemoOverrides.from_dict(json.loads(args.overrides.read_text(encoding="utf-8")))
    else:
        overrides = overrides_for(cfg, args.model, data, args.result.stem, profile)
    shape = workload_shape(cfg, args.model, vocab_size=overrides.fields["model.config.vocab_size"])
    result = new_result(
        cfg, platform=PLATFORM, framework=FRAMEWORK, model=args.model, shape=shape,
        gpu_info=collect_gpu_info(PLATFORM), run_index=args.run_index, launcher_env=nemo_env(profile),
        source=Source(kind="callback", log_path=str(args.log) if args.log else None),
        fingerprint=fingerprint(cfg, shape, data.prefix, data.tokenizer_dir) if rank == 0 else None,
    )
    update_result(result, profile_settings=profile.block())
    measurement = LightningMeasurement(
        result=result, path=args.result if rank == 0 else None, shape=shape, skip_steps=cfg.skip_steps,
        power=MeasuredWindow.open(PLATFORM, local_rank, gpus_total=cfg.world_size,
                                  tokens_per_step=cfg.tokens_per_step, warmup_steps=cfg.skip_steps),
        framework_time_key=NEMO_STEP_TIME_KEY, framework_time_label=NEMO_STEP_TIME_LABEL,
        step_log=StepLog(step_log_path(args.result), result, skip_steps=cfg.skip_steps, world_size=cfg.world_size)
        if rank == 0 else None,
        evaluation=EvaluationRecorder(cfg) if cfg.evaluates else None,
    )
    for signum in (signal.SIGINT, signal.SIGTERM):  # before Lightning installs its own handlers
        signal.signal(signum, _raise_interrupted)
    try:
        missing = missing_files(data.prefix)
        if missing:
            raise FileNotFoundError(f"dataset files missing: {', '.join(map(str, missing))}; "
                                    "prepare the data first: ./shell/run_data.sh")
        # NeMo's image only
        import fiddle as fdl

        pretrain = fdl.build(build_recipe(overrides))
        trainer = pretrain.keywords["trainer"]
        trainer.callbacks.extend([seed_callback(cfg.seed), benchmark_callback_class()(measurement)])
        pretrain()
    except BaseException as exc:
        measurement.finish_from_exception(exc)  # no-op if the callback already wrote the result
        raise
    if not measurement.finished:
        measurement.finish("failed", "NeMo returned without finishing training (on_train_end never ran)")
    return 0 if result.status == "ok" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.nemo.entry",
        description="NeMo 2 pretraining of one model with tprimat's step measurement (run under torchrun by "
        "python -m train.launch --framework nemo; `python -m train.launch ... --dry-run` shows the plan).",
    )
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--result", required=True, type=Path, help="result JSON to write (rank 0)")
    parser.add_argument("--overrides", type=Path, help="overrides JSON written by the launcher (default: from config)")
    parser.add_argument("--log", type=Path, help="the launcher's log file, recorded in the result")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    args = parser.parse_args(argv)
    try:
        apply_profile(load_config(), PLATFORM, FRAMEWORK, args.model)
    except (ConfigError, ProfileError) as exc:
        print(f"train.nemo.entry: {exc}", file=sys.stderr)
        return 2
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
