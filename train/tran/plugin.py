"""``tran``'s plugin (:class:`train.launch.contract.Plugin`): the reference trainer's launch, result and settings.

``deep`` (``train/deep/plugin.py``) reuses the launch (:func:`worker_plan`) and the settings record
(:func:`reference_record`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.launch.job_result import collect_own_result
from train.launch.torchrun import worker_argv
from train.settings.expected import expected_settings
from train.settings.platform_env import launcher_env
from utils.config.model import REPO_ROOT, Config
from utils.measure.memory import Recipe, tran_recipe
from utils.measure.quality import FIXED_SET, held_out_notes
from utils.schema.model import Result
from utils.spec.models import workload_shape

WORKER_MODULE = "train.tran.worker"
TRAN_RESOLVED_BY = ("tprimat itself: tran is the reference trainer (train/tran/worker.py, train/tran/step.py), "
                    "so its settings are the configuration; no framework to ask")


def check_supported(cfg: Config) -> None:
    """tran is data-parallel only (FSDP2): refuse what it cannot run instead of running something else."""
    if cfg.tp * cfg.pp * cfg.cp != 1:
        raise ValueError(f"tran is data-parallel only: TP={cfg.tp}, PP={cfg.pp}, CP={cfg.cp} must all be 1 "
                         "(use mega/prim/nemo for model parallelism)")
    if cfg.fp8:
        raise ValueError("FP8=true is not supported by tran (no Transformer Engine); set FP8=false for tran")


def worker_plan(ctx: RunContext, module: str, extra_env: dict[str, str] | None = None,
                extra_argv: list[str] | None = None) -> LaunchPlan:
    """``torchrun ... -m <module>`` (tran, deep; a one-process cpu job without torchrun: train/launch/torchrun.py
    ``worker_argv``); on cpu, OMP threads split the cores between the processes."""
    cfg = ctx.cfg
    check_supported(cfg)
    extra: dict[str, str] = dict(extra_env or {})
    if ctx.platform == "cpu":
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        extra["OMP_NUM_THREADS"] = str(max(1, cores // cfg.gpus_per_node))
    start, rank_env = worker_argv(cfg, ctx.platform, module)
    extra.update(rank_env)
    argv = [*start, "--model", ctx.model, "--platform", ctx.platform,
            "--result", str(ctx.result_path), "--log-path", str(ctx.log_path), *(extra_argv or [])]
    if ctx.run_index is not None:
        argv += ["--run-index", str(ctx.run_index)]
    env = launcher_env(ctx.platform, extra)
    env["TPRIMAT_LAUNCHER_ENV"] = ",".join(sorted(env))  # so the worker can record what tprimat set
    shape = workload_shape(cfg, ctx.model)
    return LaunchPlan(argv=argv, env=env, cwd=REPO_ROOT,
                      notes=["global rank 0 writes the result; every rank samples its own GPU's power",
                             f"model: {shape.display_name}, {shape.hf_architecture} built with num_hidden_layers="
                             f"{shape.num_layers} (MODEL_SIZE={cfg.model_size}, "
                             f"MODEL_LAYERS={cfg.model_layers or ''})", *held_out_notes(cfg, FIXED_SET)])


def plan(ctx: RunContext) -> LaunchPlan:
    """``torchrun ... -m train.tran.worker``: FSDP2 (train/tran/shard.py), compiled per layer under TRAN_COMPILE."""
    launch = worker_plan(ctx, WORKER_MODULE)
    cfg, layers = ctx.cfg, workload_shape(ctx.cfg, ctx.model).num_layers
    launch.notes.append(
        f"FSDP2: fully_shard on each of the {layers} decoder layers plus the root, MixedPrecisionPolicy("
        f"param_dtype={cfg.precision}, reduce_dtype=fp32); fp32 master weights, gradients and AdamW states sharded "
        f"over {cfg.world_size} rank(s); torch.compile per decoder layer: "
        f"{'on' if cfg.tran_compile_on(ctx.platform) else 'off'} (TRAN_COMPILE)")
    return launch


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result | None:
    """The result rank 0 wrote (or the cause found in the log); None lets the launcher record the failure."""
    return collect_own_result(ctx, returncode)


def reference_record(ctx: RunContext) -> dict[str, Any]:
    """The settings tran and deep share: their model, samples, optimizer and schedule are tprimat's own."""
    cfg = ctx.cfg
    keys = ("seed", "micro_batch_size", "global_batch_size", "seq_length", "train_iters", "lr", "min_lr",
            "lr_decay_style", "lr_warmup_iters", "lr_decay_iters", "weight_decay", "adam_beta1", "adam_beta2",
            "clip_grad", "init_method_std", "data_parallel_size", "precision", "num_layers", "hidden_size",
            "ffn_hidden_size", "num_attention_heads", "num_query_groups", "rotary_base", "norm_epsilon",
            "add_qkv_bias", "untie_embeddings_and_output_weights", "adam_eps", "hidden_dropout", "attention_dropout",
            "lr_step_1", "lr_step_2", "lr_step_last", "output_layer_init_method_std")
    shape = workload_shape(cfg, ctx.model)
    table = expected_settings(cfg, "nvd", shape, shape.vocab_size)
    record = {key: table[key] for key in keys}
    record.update(attention_backend="sdpa", tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                  context_parallel_size=1)
    return record


# The contract's preflight: None, the standard one (train/launch/preflight.py checks what resolve() below answers).
preflight = None


def resolve(ctx: RunContext, plan: LaunchPlan) -> Resolution:
    """tprimat is the framework: the record is the configuration, with what FSDP2 will do on top (the worker reads
    them back from the model it built and stops before step 1 when they differ)."""
    record = reference_record(ctx)
    # FSDP2 reduce-scatters fp32 gradients (MixedPrecisionPolicy reduce_dtype), overlapped with the backward
    # pass when there is more than one rank: unlike the fairness table.
    record.update(grad_reduce_in_fp32=True, overlap_grad_reduce=ctx.cfg.world_size > 1,
                  sharding="FSDP2 (fully_shard)", param_dtype=ctx.cfg.precision, grad_reduce_dtype="fp32",
                  compile=ctx.cfg.tran_compile_on(ctx.platform))
    return Resolution(record, TRAN_RESOLVED_BY)


def memory(ctx: RunContext, plan: LaunchPlan) -> Recipe:
    """FSDP2: fp32 master weights, gradients and AdamW states sharded over DP, bf16 compute (train/tran/shard.py)."""
    return tran_recipe("fsdp2", ctx.cfg.world_size)


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """tran runs no Megatron-LM or Primus tree."""
    return None, None
