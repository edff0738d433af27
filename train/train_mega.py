"""``mega``: Megatron-LM's own ``pretrain_gpt.py`` on AMD and NVIDIA, read back from its log.

Plugin of :mod:`train.launch`: :func:`plan` builds the exact ``torchrun ...
pretrain_gpt.py`` command from the typed config and the model shape table (flags
from :mod:`train.megatron_args`, shared with Primus); :func:`collect` turns the
log into the unified result with :mod:`evaluate.extract`.

Megatron-LM is taken from ``MEGATRON_PATH``, else from the image: ``/opt/megatron-lm``
(NeMo image, nvd) or ``$PRIMUS_PATH/third_party/Megatron-LM`` (Primus image, amd,
``PRIMUS_PATH`` defaulting to ``/workspace/Primus``). When it or the prepared data is
missing, a real run stops with that reason (the launcher records a failed result);
``--dry-run`` still prints the full command, with the reason as a note, so the
command can be reviewed on a machine without Megatron.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evaluate.extract import build_result
from evaluate.fingerprint import fingerprint
from train.launch import LaunchPlan, RunContext, torchrun_argv
from train.megatron_args import (
    ATTENTION_BACKEND,
    VocabPadding,
    find_megatron,
    megatron_settings,
    missing_data,
    precision_label,
    render_cli,
    vocab_padding,
)
from train.platform_env import attention_env, launcher_env
from utils.configure import Config
from utils.dataset import dataset_prefix, tokenizer_dir
from utils.hardware import collect_gpu_info
from utils.models import ModelShape, get_shape

SPLIT_ALL_TRAIN = "100,0,0"


def index_cache_dir(cfg: Config) -> Path:
    """Where Megatron caches its sample/shuffle indices (shared by mega and prim: same indices)."""
    return cfg.data_dir / "megatron_index_cache"


def megatron_args(
    cfg: Config,
    shape: ModelShape,
    platform: str,
    data_prefix: Path,
    tokenizer_dir: Path,
    padding: VocabPadding | None = None,
) -> list[str]:
    """The exact ``pretrain_gpt.py`` argument list for this workload (pure: no process is started)."""
    padding = padding or vocab_padding(cfg, shape.key, shape, tokenizer_dir)
    settings = megatron_settings(cfg, shape, platform, tokenizer_dir, padding)
    settings.update(
        data_path=[str(data_prefix)],
        split=SPLIT_ALL_TRAIN,
        data_cache_path=str(index_cache_dir(cfg)),
    )
    return render_cli(settings)


def model_inputs(ctx: RunContext) -> tuple[Path, Path, ModelShape, VocabPadding]:
    """Data prefix, tokenizer directory, model shape and vocabulary padding (shared with Primus)."""
    cfg = ctx.cfg
    prefix, tokenizer = dataset_prefix(cfg, ctx.model), tokenizer_dir(cfg, ctx.model)
    shape = get_shape(ctx.model, cfg.model_size)
    return prefix, tokenizer, shape, vocab_padding(cfg, ctx.model, shape, tokenizer)


# The iteration lines are printed by the last rank, so the last node's launcher extracts the result.
RESULT_NODE = "last"


def plan(ctx: RunContext) -> LaunchPlan:
    """``torchrun <rendezvous> <MEGATRON_PATH>/pretrain_gpt.py <flags>`` with the platform's environment."""
    cfg = ctx.cfg
    prefix, tokenizer, shape, padding = model_inputs(ctx)
    root, root_problem = find_megatron(cfg, ctx.platform)
    notes = [padding.note()]
    problems = [p for p in (root_problem, missing_data(prefix, tokenizer)) if p is not None]
    if problems and not ctx.dry_run:
        raise FileNotFoundError("; ".join(problems))
    notes += [f"{problem} (a real run stops here)" for problem in problems]
    argv = [*torchrun_argv(cfg), str(root / "pretrain_gpt.py"),
            *megatron_args(cfg, shape, ctx.platform, prefix, tokenizer, padding)]
    env = {**launcher_env(ctx.platform), **attention_env(ATTENTION_BACKEND[ctx.platform])}
    return LaunchPlan(argv=argv, env=env, cwd=root if root_problem is None else None, notes=notes)


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> dict[str, Any] | None:
    """The unified result from the run's log (failures included, with the reason)."""
    return collect_from_log(ctx, plan, returncode)


def collect_from_log(ctx: RunContext, plan: LaunchPlan, returncode: int) -> dict[str, Any]:
    """Extract the unified result from a Megatron-style log; used by ``mega`` and ``prim``."""
    cfg = ctx.cfg
    prefix, tokenizer, shape, padding = model_inputs(ctx)
    if not padding.matches_target:
        shape = get_shape(ctx.model, cfg.model_size, vocab_size=padding.padded)
    result = build_result(
        cfg, log_path=ctx.log_path, platform=ctx.platform, framework=ctx.framework, model=ctx.model,
        returncode=returncode, shape=shape, gpu_info=collect_gpu_info(ctx.platform, "fp8" if cfg.fp8 else "bf16"),
        launcher_env=plan.env, run_index=ctx.run_index, fingerprint=fingerprint(cfg, shape, prefix, tokenizer),
        precision_effective=precision_label(cfg), extra_logs=plan.extra_logs,
    )
    result["source"]["command"] = plan.argv
    result["warnings"] = [*plan.notes, *result["warnings"]]
    return result
