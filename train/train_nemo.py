"""The ``nemo`` launcher: NeMo 2 pretraining recipes on NVIDIA, measured by tprimat's own callback.

Two roles in one module:

* launcher plugin (``train.launch`` imports it): :func:`plan` writes the recipe
  overrides to a JSON file next to the log and starts ``torchrun -m train.train_nemo``
  with the NVIDIA environment; :func:`collect` reads the result the callback wrote,
  or turns the log into a failed result with the cause (OOM, NCCL, NaN) when the
  process died before it could write one.
* training entry (``python -m train.train_nemo``, one process per GPU under torchrun):
  builds ``llm.llama31_8b`` / ``llm.qwen25_7b`` ``pretrain_recipe``, applies every
  override from :mod:`train.nemo_recipe` (NeMo-free, so ``--dry-run`` needs no NeMo),
  appends :class:`utils.monitor.BenchmarkCallback` to the trainer and runs it in this
  process.

How it runs: ``nemo_run.run(recipe, direct=True)`` (what NeMo 2.3's own recipe tests
call under torchrun) is, in nemo-run 0.4 (``run/task.py: direct_run_fn``), exactly
``fdl.build(recipe)()``: build the recipe with fiddle and call it in this process.
tprimat does those two steps itself so that it can append its callback to the *built*
trainer in between: fiddle copies configured values while building, and the callback
instance tprimat checks afterwards must be the one Lightning calls. torchrun provides
the ranks; Lightning picks them up from its environment.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import signal
import sys
from collections import deque
from pathlib import Path
from typing import Any

from train.launch import LaunchPlan, RunContext, failure_result, log_path_for, read_own_result, torchrun_argv
from train.nemo_recipe import ATTENTION_BACKEND, NEMO_IMAGE, NemoOverrides, build_overrides
from train.platform_env import attention_env, launcher_env
from utils.configure import REPO_ROOT, Config, ConfigError, load_config
from utils.models import ModelShape, get_shape
from utils.result import result_path

PLATFORM = "nvd"
FRAMEWORK = "nemo"
# NeMo-specific variables on top of train/platform_env.py's NVIDIA table (recorded in the result).
NEMO_ENV: dict[str, str] = {
    # Data-loader workers fork after the HF tokenizer was used; its thread pool must not be inherited.
    "TOKENIZERS_PARALLELISM": "false",
}


def nemo_env() -> dict[str, str]:
    """The NVIDIA launcher table, NeMo's extras and the NVTE_* switches of the attention backend
    the overrides set (``model.config.attention_backend``), which Megatron checks at model build."""
    return {**launcher_env(PLATFORM, NEMO_ENV), **attention_env(ATTENTION_BACKEND)}
# NeMo's TimingCallback logs this per step without synchronizing the device; recorded beside ours.
NEMO_STEP_TIME_KEY = "train_step_timing in s"
LOG_SCAN_LINES = 400
FAILURE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("out of memory", "GPU out of memory"),
    ("outofmemoryerror", "GPU out of memory"),
    ("nccl", "NCCL (collective communication) error"),
    ("found nan", "NaN found in gradients"),
    ("nan in", "NaN found during training"),
)


# ---------------------------------------------------------------------------
# overrides (no NeMo needed)


def resolve_shape(cfg: Config, model: str, tokenizer_dir: Path) -> ModelShape:
    """The model shape with the real vocabulary: the tokenizer's for tiny models, checked for full ones.

    Raises ``FileNotFoundError`` (a missing tokenizer) or ``ValueError`` (a tokenizer
    with more ids than the model's embedding has rows).
    """
    from utils.dataset import load_tokenizer, vocab_size

    tokens = vocab_size(load_tokenizer(tokenizer_dir))
    if cfg.model_size == "tiny":
        return get_shape(model, "tiny", vocab_size=tokens)
    shape = get_shape(model, cfg.model_size)
    if tokens > shape.vocab_size:
        raise ValueError(f"tokenizer in {tokenizer_dir} has {tokens} ids but {shape.display_name} has "
                         f"{shape.vocab_size} embedding rows: wrong tokenizer for this model")
    return shape


def nemo_dirs(cfg: Config, stem: str) -> tuple[Path, Path]:
    """(NeMo's log directory for this run, Megatron's dataset index cache)."""
    base = cfg.output_dir / "nemo"
    return base / stem, base / "index_cache"


def overrides_for(cfg: Config, model: str, stem: str) -> NemoOverrides:
    from utils.dataset import dataset_prefix, tokenizer_dir

    tok = tokenizer_dir(cfg, model)
    log_dir, index_dir = nemo_dirs(cfg, stem)
    return build_overrides(cfg, model, resolve_shape(cfg, model, tok), data_prefix=dataset_prefix(cfg, model),
                           tokenizer_dir=tok, log_dir=log_dir, index_cache_dir=index_dir)


def overrides_path(ctx: RunContext) -> Path:
    return ctx.log_path.with_name(f"{ctx.result_path.stem}.nemo_overrides.json")


def missing_data(cfg: Config, model: str) -> list[Path]:
    from utils.dataset import dataset_prefix

    prefix = dataset_prefix(cfg, model)
    return [p for p in (Path(f"{prefix}.bin"), Path(f"{prefix}.idx")) if not p.is_file()]


# ---------------------------------------------------------------------------
# launcher plugin


# Global rank 0 (on the first node) writes the measured result.
RESULT_NODE = "first"


def plan(ctx: RunContext) -> LaunchPlan:
    """torchrun + ``-m train.train_nemo`` with the NVIDIA environment and the overrides file."""
    if ctx.platform != PLATFORM:
        raise ValueError(f"the nemo launcher runs on {PLATFORM} only (FRAMEWORK=nemo on {ctx.platform} maps to "
                         "that platform's own stack)")
    overrides = overrides_for(ctx.cfg, ctx.model, ctx.result_path.stem)
    file = overrides_path(ctx)
    argv = [*torchrun_argv(ctx.cfg), "-m", "train.train_nemo", "--model", ctx.model,
            "--result", str(ctx.result_path), "--overrides", str(file), "--log", str(ctx.log_path)]
    if ctx.run_index is not None:
        argv += ["--run-index", str(ctx.run_index)]
    notes = [*overrides.notes, f"runs inside {NEMO_IMAGE}; the result is written by tprimat's Lightning callback"]
    missing = missing_data(ctx.cfg, ctx.model)
    if missing:
        notes.append(f"dataset files missing now: {', '.join(map(str, missing))} (prepare the data first)")
    return LaunchPlan(argv=argv, env=nemo_env(), cwd=REPO_ROOT,
                      files={file: overrides.to_json()}, notes=notes)


def classify_failure(log_path: Path) -> str | None:
    """The likely cause in the log's last lines (OOM, NCCL, NaN), or None."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            tail = [line.rstrip() for line in deque(handle, maxlen=LOG_SCAN_LINES)]
    except OSError:
        return None
    for line in reversed(tail):
        lowered = line.lower()
        for needle, cause in FAILURE_PATTERNS:
            if needle in lowered:
                return f"{cause}: {line.strip()[:300]}"
    return None


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> dict[str, Any] | None:
    """The callback's result; without one, a failure result naming the cause found in the log."""
    result = read_own_result(ctx)
    if result is not None:
        return result
    cause = classify_failure(ctx.log_path)
    if cause is None:
        return None  # the launcher records exit code and log tail
    interrupted = returncode < 0 or returncode in (130, 143)
    return failure_result(ctx, "incomplete" if interrupted else "failed",
                          f"{cause} (exit code {returncode}; no result was written)", ctx.log_path)


# ---------------------------------------------------------------------------
# training entry (inside the NeMo image, one process per GPU)


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
    import nemo_run as run

    recipe = _resolve(overrides.recipe)(**overrides.recipe_kwargs)
    apply_overrides(recipe, overrides, run)
    return recipe


def reseed(seed: int) -> None:
    """What NeMo 2.3 does at start-up with its fixed seed 1234, with SEED instead (model init, dropout)."""
    import random

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
    from lightning.pytorch.callbacks import Callback

    class ReseedCallback(Callback):
        """Lightning calls ``setup`` after the process groups exist and before the model is built."""

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            reseed(seed)

    return ReseedCallback()


def _raise_interrupted(signum: int, _frame: Any) -> None:
    from utils.result import Interrupted

    raise Interrupted(signum)


def train(args: argparse.Namespace) -> int:
    from evaluate.fingerprint import fingerprint
    from utils.dataset import dataset_prefix, tokenizer_dir
    from utils.hardware import collect_gpu_info
    from utils.monitor import LightningMeasurement, StepMonitor, benchmark_callback_class
    from utils.power import PowerSampler, open_reader
    from utils.result import new_result

    cfg = load_config()
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    stem = args.result.stem
    if args.overrides:
        overrides = NemoOverrides.from_dict(json.loads(args.overrides.read_text(encoding="utf-8")))
    else:
        overrides = overrides_for(cfg, args.model, stem)
    shape = get_shape(args.model, cfg.model_size, vocab_size=overrides.fields["model.config.vocab_size"])
    prefix, tok = dataset_prefix(cfg, args.model), tokenizer_dir(cfg, args.model)
    precision = cfg.precision + ("+fp8" if cfg.fp8 else "")
    result = new_result(
        cfg, platform=PLATFORM, framework=FRAMEWORK, model=args.model, shape=shape,
        gpu_info=collect_gpu_info(PLATFORM), source_kind="callback", log_path=args.log, run_index=args.run_index,
        launcher_env=nemo_env(),
        fingerprint=fingerprint(cfg, shape, prefix, tok) if rank == 0 else None, precision_effective=precision,
    )
    reader, power_reason = open_reader(PLATFORM, local_rank)
    measurement = LightningMeasurement(
        result=result, path=args.result if rank == 0 else None, shape=shape, skip_steps=cfg.skip_steps,
        global_batch_size=cfg.gbs, seq_len=cfg.sl, world_size=cfg.world_size, expected_steps=cfg.train_iters,
        monitor=StepMonitor(), power=PowerSampler(reader) if reader is not None else None,
        power_reason=power_reason, framework_time_key=NEMO_STEP_TIME_KEY,
        framework_time_label="NeMo TimingCallback (clock read without device synchronize)",
    )
    for signum in (signal.SIGINT, signal.SIGTERM):  # before Lightning installs its own handlers
        signal.signal(signum, _raise_interrupted)
    try:
        missing = missing_data(cfg, args.model)
        if missing:
            raise FileNotFoundError(f"dataset files missing: {', '.join(map(str, missing))}; "
                                    "prepare the data first: ./shell/run_data.sh")
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
    return 0 if result["status"] == "ok" else 1


# ---------------------------------------------------------------------------
# CLI


def dry_run(cfg: Config, model: str) -> str:
    """The effective overrides (JSON) and the launch command, as ``train.launch --dry-run`` would run them."""
    path = result_path(cfg.output_dir, PLATFORM, FRAMEWORK, model)
    ctx = RunContext(cfg=cfg, platform=PLATFORM, framework=FRAMEWORK, model=model, run_index=None,
                     result_path=path, log_path=log_path_for(cfg, PLATFORM, FRAMEWORK, model, None))
    launch = plan(ctx)
    overrides = next(iter(launch.files.values()))
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(launch.env.items()))
    lines = ["# effective NeMo recipe overrides", overrides.rstrip("\n"), "", "# launch command",
             f"cd {shlex.quote(str(launch.cwd))} && {env} {shlex.join(launch.argv)}"]
    lines += [f"# note: {note}" for note in launch.notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.train_nemo",
        description="NeMo 2 pretraining of one model with tprimat's step measurement (run under torchrun by "
        "train/train_nvd_nemo_<model>.sh). --dry-run prints the recipe overrides and the launch command "
        "and needs no NeMo.",
    )
    parser.add_argument("--model", required=True, choices=("llama", "qwen"))
    parser.add_argument("--dry-run", action="store_true", help="print overrides and launch command; run nothing")
    parser.add_argument("--result", type=Path, help="result JSON to write (rank 0)")
    parser.add_argument("--overrides", type=Path, help="overrides JSON written by the launcher (default: from config)")
    parser.add_argument("--log", type=Path, help="the launcher's log file, recorded in the result")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
        if args.dry_run:
            sys.stdout.write(dry_run(cfg, args.model))
            return 0
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        print(f"train.train_nemo: {exc}", file=sys.stderr)
        return 2
    if args.result is None:
        parser.error("--result is required unless --dry-run is given")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
