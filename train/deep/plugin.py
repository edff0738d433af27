"""``deep``'s plugin (:class:`train.launch.contract.Plugin`): DeepSpeed with ZeRO over ``tran``'s model and data.

Shared with ``tran``: the model, optimizer groups, LR schedule, samples, measured loop and launch
(``train/tran/``). DeepSpeed owns the data-parallel engine, ZeRO stage ``ZERO_STAGE``, bf16, gradient accumulation
and clipping.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.launch.job_result import collect_own_result
from train.tran.plugin import reference_record, worker_plan
from utils.config.model import Config
from utils.measure.memory import Recipe, deep_recipe
from utils.schema.model import Result

FRAMEWORK = "deep"
MODULE = "train.deep.worker"
# DeepSpeed's accelerator per platform (ROCm builds of torch run DeepSpeed's "cuda" accelerator).
ACCELERATOR = {"cpu": "cpu", "nvd": "cuda", "amd": "cuda"}
PIN_FILES = {"cpu": "cpu-requirements.txt", "nvd": "nvd-requirements.txt", "amd": "amd-requirements.txt"}
# Communication dtype of the gradient reduction, as the fairness table has it (no fp32 all-reduce under bf16).
COMMUNICATION_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def deepspeed_config(cfg: Config) -> dict[str, Any]:
    """The DeepSpeed JSON config of the workload; every key is one of config.env's or a fairness-table choice."""
    return {
        "train_batch_size": cfg.gbs,
        "train_micro_batch_size_per_gpu": cfg.mbs,
        "gradient_accumulation_steps": cfg.ga,
        "gradient_clipping": cfg.grad_clip,  # 0 turns clipping off, as GRAD_CLIP=0 does everywhere
        "bf16": {"enabled": cfg.precision == "bf16"},
        "fp16": {"enabled": cfg.precision == "fp16", "loss_scale": 0},  # 0: dynamic loss scaling
        "communication_data_type": COMMUNICATION_DTYPE[cfg.precision],
        "zero_optimization": {
            "stage": cfg.zero_stage,
            # The fairness table: gradient reduction is not overlapped with the backward pass.
            "overlap_comm": False,
            "contiguous_gradients": True,
        },
        # The optimizer and the LR are tprimat's (train/tran/step.py), set on the engine each step.
        "zero_allow_untested_optimizer": True,
        "steps_per_print": cfg.train_iters + 1,  # DeepSpeed's own progress lines off; tprimat prints each step
        "wall_clock_breakdown": False,
    }


def config_path(ctx: RunContext) -> Path:
    return ctx.cfg.output_dir / "generated" / f"{ctx.result_path.stem}.deepspeed.json"


def deepspeed_missing(platform: str) -> str | None:
    """Why DeepSpeed cannot be imported here, or None (looked up without importing it: that takes seconds)."""
    if importlib.util.find_spec("deepspeed") is not None:
        return None
    return (f"DeepSpeed is not installed in this Python ({sys.executable}): install the deepspeed line of "
            f"{PIN_FILES[platform]} (the image build does, ./shell/build.sh) or pick another framework")


def plan(ctx: RunContext) -> LaunchPlan:
    """``torchrun ... -m train.deep.worker --deepspeed-config <generated JSON>``, the ``tran`` launch otherwise."""
    missing = deepspeed_missing(ctx.platform)
    if missing and not ctx.dry_run:
        raise ValueError(missing)
    path = config_path(ctx)
    launch = worker_plan(ctx, MODULE, {"DS_ACCELERATOR": ACCELERATOR[ctx.platform]},
                         ["--deepspeed-config", str(path)])
    launch.files[path] = json.dumps(deepspeed_config(ctx.cfg), indent=2) + "\n"
    launch.notes.append(f"DeepSpeed ZeRO stage {ctx.cfg.zero_stage} (ZERO_STAGE); the engine's resolved settings "
                        "are stored in the result's effective_settings")
    if missing:
        launch.notes.append(f"{missing} (a real run stops here)")
    return launch


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result | None:
    """The result rank 0 wrote (or the cause found in the log); None lets the launcher record the failure."""
    return collect_own_result(ctx, returncode)


# The contract's preflight: None, the standard one (train/launch/preflight.py checks what resolve() below answers).
preflight = None


def resolve(ctx: RunContext, plan: LaunchPlan) -> Resolution:
    """deep trains tran's model with tran's loop; DeepSpeed resolves its own config only inside
    ``deepspeed.initialize``, where train/deep/worker.py compares it with the config and stops on a difference."""
    record = reference_record(ctx)
    record["zero_stage"] = ctx.cfg.zero_stage
    return Resolution(record, "tprimat's configuration for the DeepSpeed engine (train/deep/worker.py): the "
                      "engine's own resolution is checked at deepspeed.initialize, before the first step")


def memory(ctx: RunContext, plan: LaunchPlan) -> Recipe:
    """DeepSpeed bf16 at ZERO_STAGE: bf16 weights and gradients, fp32 master weights and AdamW states."""
    return deep_recipe(ctx.cfg.zero_stage)


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """deep runs no Megatron-LM or Primus tree."""
    return None, None
