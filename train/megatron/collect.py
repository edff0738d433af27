"""Reading a Megatron-style job's result from its log, shared by ``mega`` and ``prim``.

Both are measured from the iteration lines the last rank prints (``train/logs/``).
"""

from __future__ import annotations

from train.launch.contract import LaunchPlan, RunContext
from train.logs import build_result
from train.megatron.inputs import model_inputs
from utils.dataset.fingerprint import fingerprint
from utils.machine.hardware import collect_gpu_info
from utils.result.file import update_result
from utils.schema.model import Result
from utils.spec.models import workload_shape


def collect_from_log(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result:
    """The result of a Megatron-style run read from its log (failures included, with the reason)."""
    cfg = ctx.cfg
    shape, padding = model_inputs(ctx)
    if not padding.matches_target:
        shape = workload_shape(cfg, ctx.model, vocab_size=padding.padded)
    hashes = fingerprint(cfg, shape, ctx.data.prefix, ctx.data.tokenizer_dir)
    result = build_result(
        cfg, log_path=ctx.log_path, platform=ctx.platform, framework=ctx.framework, model=ctx.model,
        returncode=returncode, shape=shape, gpu_info=collect_gpu_info(ctx.platform, "fp8" if cfg.fp8 else "bf16"),
        launcher_env=plan.env, run_index=ctx.run_index, fingerprint=hashes,
        precision_effective=cfg.precision_label, extra_logs=plan.extra_logs,
    )
    source = result.source.model_copy(update={"command": plan.argv,
                                              "generated_files": [str(path) for path in plan.files]})
    return update_result(result, source=source, warnings=[*plan.notes, *result.warnings])
