"""What the ``mega`` and ``prim`` plugins share: their inputs and reading their result from the log.

Both launch Megatron-LM's trainer (directly, or through Primus) on the same encoded
data, tokenizer and index cache, and both are measured from the iteration lines the
last rank prints, so the two plugins import this module rather than each other.
"""

from __future__ import annotations

from pathlib import Path

from train.launch import LaunchPlan, RunContext
from train.logs import build_result
from train.megatron_args import VocabPadding, vocab_padding
from utils.configure import Config
from utils.dataset import dataset_prefix, tokenizer_dir
from utils.fingerprint import fingerprint
from utils.hardware import collect_gpu_info
from utils.models import ModelShape, get_shape
from utils.result import update_result
from utils.result_model import Result


def index_cache_dir(cfg: Config) -> Path:
    """Where Megatron caches its sample/shuffle indices (shared by mega and prim: same indices)."""
    return cfg.data_dir / "megatron_index_cache"


def model_inputs(ctx: RunContext) -> tuple[Path, Path, ModelShape, VocabPadding]:
    """Data prefix, tokenizer directory, model shape and vocabulary padding of the job."""
    cfg = ctx.cfg
    prefix, tokenizer = dataset_prefix(cfg, ctx.model), tokenizer_dir(cfg, ctx.model)
    shape = get_shape(ctx.model, cfg.model_size)
    return prefix, tokenizer, shape, vocab_padding(cfg, ctx.model, shape, tokenizer)


def collect_from_log(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result:
    """The result of a Megatron-style run read from its log (failures included, with the reason).

    The command and the files the plan generated (Primus's experiment YAML) are kept in ``source``.
    """
    cfg = ctx.cfg
    prefix, tokenizer, shape, padding = model_inputs(ctx)
    if not padding.matches_target:
        shape = get_shape(ctx.model, cfg.model_size, vocab_size=padding.padded)
    result = build_result(
        cfg, log_path=ctx.log_path, platform=ctx.platform, framework=ctx.framework, model=ctx.model,
        returncode=returncode, shape=shape, gpu_info=collect_gpu_info(ctx.platform, "fp8" if cfg.fp8 else "bf16"),
        launcher_env=plan.env, run_index=ctx.run_index, fingerprint=fingerprint(cfg, shape, prefix, tokenizer),
        precision_effective=cfg.precision_label, extra_logs=plan.extra_logs,
    )
    source = result.source.model_copy(update={"command": plan.argv,
                                              "generated_files": [str(path) for path in plan.files]})
    return update_result(result, source=source, warnings=[*plan.notes, *result.warnings])
