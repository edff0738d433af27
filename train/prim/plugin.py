"""``prim``: AMD's Primus (Megatron backend) on MI300X, with an experiment file tprimat writes itself.

Primus's shipped experiments carry their own workload, so :func:`experiment` builds a fresh ``modules.pre_trainer``
experiment whose ``overrides`` set every workload and architecture key from the same
:func:`train.megatron.args.megatron_settings` as ``mega`` (Primus's model files lack Qwen's QKV bias and Llama
3.1's RoPE scaling). Data goes in ``train_data_path`` (an empty one makes Primus download BookCorpus); nothing is
saved. Primus v0.5.0 cannot evaluate (:data:`CANNOT_EVALUATE`): a real run with evaluation is refused before
launch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.megatron.args import VocabPadding, attention_backend, megatron_settings, memory_recipe, profile_settings
from train.megatron.collect import collect_from_log
from train.megatron.inputs import index_cache_dir
from train.megatron.stack import ask_probe, job_inputs
from train.megatron.trees import PRIMUS_TREE, preflight_tree, primus_root
from train.profiles import IDENTICAL, AppliedProfile
from train.settings.platform_env import attention_env, launcher_env
from train.settings.runner import FrameworkUnavailable, ProbeAnswer
from utils.config.model import Config
from utils.measure.memory import Recipe
from utils.schema.model import Result
from utils.spec.models import ModelShape
from utils.spec.registry import MODELS

RUN_SCRIPT = Path("examples") / "run_pretrain.sh"
# Why prim refuses EVAL_INTERVAL/EVAL_SAMPLES at the pinned Primus (read in v0.5.0 = bfeac70c and its
# third_party/Megatron-LM = 847781764f; docs/CONFORMANCE.md).
CANNOT_EVALUATE = (
    "prim cannot evaluate at Primus v0.5.0: its loss_func reports the eval loss as a Python tuple "
    "(primus/modules/trainer/megatron/pre_trainer.py:193-205) and its loop calls Megatron 847781764f's "
    "evaluate_and_print_results (primus/modules/trainer/megatron/trainer.py:116, 1905), whose evaluate() calls "
    ".view(-1) on each entry (megatron/training/training.py:2532): AttributeError at the first evaluation. "
    "Primus v26.2 is the first release that evaluates correctly (8c5bc42d accumulates over all eval iterations; "
    "v0.7.0's b108accf evaluates but reports only the last eval batch's mean), and even it reads Megatron's "
    "continuing blocks, not MLPerf's fixed set. Set EVAL_INTERVAL=0 and EVAL_SAMPLES=0 for prim, or run mega on amd")


def primus_overrides(
    cfg: Config, shape: ModelShape, data_prefix: Path, tokenizer_dir: Path, padding: VocabPadding,
    profile: AppliedProfile = IDENTICAL, valid: Path | None = None,
) -> dict[str, Any]:
    """Every key the experiment sets: the shared Megatron settings plus Primus's data, saving and logging keys. Under
    PROFILE=tuned the recipe's settings (Primus-Turbo included) win over the keys set here."""
    if any(ch.isspace() for ch in f"{data_prefix}{valid or ''}"):
        # Primus splits train_data_path on spaces (a blend list), so such a path cannot be expressed.
        raise ValueError(f"data prefix {data_prefix} contains whitespace, which Primus cannot read; "
                         "use a DATA_DIR without spaces")
    overrides = megatron_settings(cfg, shape, "amd", tokenizer_dir, padding, profile)
    overrides.update(
        # data: our encoded dataset only
        mock_data=False,
        data_path=None,
        train_data_path=str(data_prefix),
        valid_data_path=str(valid) if cfg.evaluates and valid is not None else None,
        test_data_path=None,
        split=None,
        data_cache_path=str(index_cache_dir(cfg)),
        # no checkpoints in, none out. Primus always points ``save`` at its workspace and Megatron then requires a
        # save_interval: one past the last step, and none at its end (disable_last_saving).
        load=None,
        save=None,
        save_interval=cfg.train_iters + 1,
        finetune=False,
        auto_continue_train=False,
        disable_last_saving=True,
        # Primus's running averages: skip the same warm-up steps as tprimat, average over the rest
        log_avg_skip_iterations=cfg.skip_steps,
        log_avg_reset_interval=cfg.train_iters,
        # no external loggers; console at INFO so iteration lines reach the log
        disable_wandb=True,
        disable_tensorboard=True,
        disable_mlflow=True,
        stderr_sink_level="INFO",
        # the stock Megatron path (Primus-Turbo kernels off), the same kernels mega runs on AMD
        enable_primus_turbo=False,
    )
    overrides.update(profile_settings(profile))
    return overrides


def experiment(
    cfg: Config, model: str, shape: ModelShape, data_prefix: Path, tokenizer_dir: Path, padding: VocabPadding,
    profile: AppliedProfile = IDENTICAL, valid: Path | None = None,
) -> dict[str, Any]:
    """The Primus experiment document (``modules.pre_trainer`` layout)."""
    return {
        "work_group": "tprimat",
        "user_name": "tprimat",
        "exp_name": f"tprimat_prim_{model}",
        "workspace": str(cfg.output_dir / "primus"),
        "modules": {
            "pre_trainer": {
                "framework": "megatron",
                "config": "pre_trainer.yaml",
                "model": MODELS[model].stacks.primus_model_file,
                "overrides": primus_overrides(cfg, shape, data_prefix, tokenizer_dir, padding, profile, valid),
            }
        },
    }


def experiment_yaml(document: dict[str, Any]) -> str:
    header = "# Generated by tprimat (train/prim/plugin.py) from config.env: edit config.env, not this file.\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def experiment_path(ctx: RunContext) -> Path:
    return ctx.cfg.output_dir / "generated" / f"{ctx.result_path.stem}.primus.yaml"


def train_log_path(ctx: RunContext) -> Path:
    return ctx.log_path.with_name(f"{ctx.log_path.stem}.primus_train.log")


def plan(ctx: RunContext) -> LaunchPlan:
    """``EXP=<generated.yaml> bash examples/run_pretrain.sh`` from ``PRIMUS_PATH``."""
    if ctx.platform != "amd":
        raise ValueError(f"prim runs on amd only (platform {ctx.platform}); on nvd the vendor stack is nemo")
    cfg = ctx.cfg
    root = primus_root(cfg)
    missing = None
    if not (root / RUN_SCRIPT).is_file():
        missing = (f"Primus not found: no {RUN_SCRIPT} in {root}; set PRIMUS_PATH in config.env or run "
                   "inside the rocm/primus image (./shell/run_train.sh)")
    if cfg.evaluates:  # refused before launch; the dry run shows the evaluation settings with this note
        missing = f"{missing}; {CANNOT_EVALUATE}" if missing else CANNOT_EVALUATE
    job = job_inputs(ctx, missing)
    exp_file, train_log = experiment_path(ctx), train_log_path(ctx)
    # Variables run_pretrain.sh reads. They are set outright (not "caller wins"): a stale EXP
    # or NNODES in the shell would otherwise run a different experiment.
    run_vars = {
        "EXP": str(exp_file),
        "TRAIN_LOG": str(train_log),
        "DATA_PATH": str(cfg.data_dir),
        "NNODES": str(cfg.nnodes),
        "NODE_RANK": str(cfg.node_rank),
        "GPUS_PER_NODE": str(cfg.gpus_per_node),
        "MASTER_ADDR": cfg.master_addr,
        "MASTER_PORT": str(cfg.master_port),
        "PRIMUS_HIPBLASLT_TUNING_STAGE": "0",
    }
    text = experiment_yaml(experiment(cfg, ctx.model, job.shape, job.prefix, job.tokenizer, job.padding, ctx.profile,
                                      ctx.data.valid))
    return LaunchPlan(
        argv=["bash", str(RUN_SCRIPT)], cwd=root,
        env={**launcher_env("amd", ctx.profile.env),
             **attention_env(attention_backend("amd", ctx.profile, ctx.cfg.megatron_impl)), **run_vars},
        files={exp_file: text}, notes=job.notes, extra_logs=[train_log],
    )


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result:
    """The result read from the captured output (or Primus's TRAIN_LOG), failures included."""
    return collect_from_log(ctx, plan, returncode)


# The contract's preflight: None, the standard one (train/launch/preflight.py checks what resolve() below answers).
preflight = None


def resolve(ctx: RunContext, plan: LaunchPlan) -> Resolution:
    """Primus's experiment loading, its trainer's argument updates and Megatron's validation, on the plan's YAML."""
    cfg = ctx.cfg
    root = preflight_tree(PRIMUS_TREE, primus_root(cfg), "examples/run_pretrain.sh", "Primus",
                          f"prim runs inside the rocm/primus image (set PRIMUS_PATH or {PRIMUS_TREE})")
    backend = root / "third_party" / "Megatron-LM"  # Primus's own submodule (train.megatron.trees.primus_megatron)
    if not (backend / "pretrain_gpt.py").is_file():
        raise FrameworkUnavailable(f"Primus's Megatron-LM not found: no pretrain_gpt.py in {backend} "
                                   "(a Primus checkout needs its third_party/Megatron-LM submodule)")
    _, text = plan.generated(".primus.yaml")

    def resolved_by(answer: ProbeAnswer) -> str:
        version = answer.payload["framework"].get("primus") or "(version not reported)"
        return (f"Primus {version} at {root} with its Megatron-LM {backend}: load_primus_config "
                f"+ update_primus_config + validate_args + validate_args_on_rocm + attention check, in {answer.python}")

    with tempfile.TemporaryDirectory(prefix="tprimat-preflight-") as scratch:
        document = yaml.safe_load(text)
        document["workspace"] = scratch  # Primus creates its experiment folders there, not in OUTPUT_DIR
        exp = Path(scratch) / "experiment.yaml"
        exp.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        request = {"primus": str(root), "backend": str(backend), "exp": str(exp), "data_path": str(cfg.data_dir)}
        return ask_probe(ctx, plan, "train.prim.probe", "Primus", request, resolved_by, dataset_code=backend)


def memory(ctx: RunContext, plan: LaunchPlan) -> Recipe:
    """Megatron's bf16 weights and gradient buffer, the distributed optimizer's sharded fp32 states (TE kernels)."""
    return memory_recipe(ctx.cfg, "prim")


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """(Primus's own Megatron-LM, the Primus tree) the preflight asked (``TPRIMAT_PRIMUS``, else ``PRIMUS_PATH``)."""
    root = Path(os.environ.get(PRIMUS_TREE) or primus_root(ctx.cfg))
    return root / "third_party" / "Megatron-LM", root
