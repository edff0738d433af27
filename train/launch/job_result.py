"""A job's result when the framework's own measurement is missing: failures, placeholders, the trainer's file.

Shared by the launcher (``train/launch/launcher.py``: placeholders, failed and incomplete results) and
by the plugins that measure in-process (``tran``, ``deep``, ``nemo``: :func:`collect_own_result`).
"""

from __future__ import annotations

from pathlib import Path

from train.launch.contract import RunContext
from utils.config.models import workload_shape
from utils.machine.hardware import collect_gpu_info
from utils.result.failures import cause_in_log, is_interrupted
from utils.result.file import ResultError, finalize_result, new_result, read_result, update_result
from utils.result.model import Result, Source
from utils.result.step_log import recover_result, step_log_path


def with_profile(ctx: RunContext, result: Result) -> Result:
    """The job's profile recorded in its result: the profile that ran and what it changed (train/profiles/)."""
    return update_result(result, profile=ctx.profile.name, profile_settings=ctx.profile.block())


def failure_result(ctx: RunContext, status: str, reason: str, log_path: Path | None = None) -> Result:
    """A valid result that records why a job produced no measurement."""
    shape = workload_shape(ctx.cfg, ctx.model)
    result = new_result(
        ctx.cfg, platform=ctx.platform, framework=ctx.framework, model=ctx.model, shape=shape,
        gpu_info=collect_gpu_info(ctx.platform), run_index=ctx.run_index,
        source=Source(kind="log", log_path=str(log_path) if log_path else None),
    )
    return finalize_result(with_profile(ctx, result), status, reason)


def read_own_result(ctx: RunContext) -> Result | None:
    """The result the training process itself wrote, or None if absent/invalid (or still the placeholder)."""
    if ctx.result_file is not None and ctx.result_file.is_placeholder():
        return None
    try:
        return read_result(ctx.result_path)
    except ResultError:
        return None


def collect_own_result(ctx: RunContext, returncode: int) -> Result | None:
    """``collect`` of the in-process plugins (tran, nemo): the result global rank 0 wrote.

    Without one: the steps rank 0 recorded as it went (``utils/result/step_log.py``: a trainer
    killed with SIGKILL keeps every step it measured), as an ``incomplete`` result with
    the cause; else a result naming the cause found in the log (out of memory,
    NCCL/RCCL, NaN, as ``utils/result/failures.py`` classifies it); with no such cause (a
    generic exception says less than the traceback around it), None, and the launcher
    records the exit code and the log's tail.
    """
    result = read_own_result(ctx)
    if result is not None:
        return result
    cause = cause_in_log(ctx.log_path)
    died = f"exit code {returncode}" + (f", killed by signal {-returncode}" if returncode < 0 else "")
    reason = f"the trainer ended ({died}) without writing its result"
    if cause is not None:
        reason += f"; {cause.kind}: {cause.text}"
    recovered = recover_result(step_log_path(ctx.result_path), reason)
    if recovered is not None:
        return recovered
    if cause is None or cause.kind == "exception":
        return None
    status = "incomplete" if is_interrupted(returncode) else "failed"
    return failure_result(ctx, status, f"{cause.kind}: {cause.text} (exit code {returncode}; no result was written)",
                          ctx.log_path)
