"""A job's one result: its pieces collected as the job goes, the :class:`Result` emitted once, however the job ends.

:class:`JobResult` is the only place the launcher builds a job's result: the memory estimate, the preflight's
settings and versions, the profile, the framework's own result (or why there is none), the energy
(``train/launch/energy.py``) and the status a signal leaves, composed once in :meth:`JobResult.emit` for every
ending. :class:`ResultFile` keeps the ending on record: room for the final result is reserved and an
``incomplete`` placeholder replaces any older result before the start, so even a launcher killed outright leaves a
result that says so; a failed final write falls back to a compact ``failed`` one, never a truncated file.
In-process plugins (``tran``, ``deep``, ``nemo``) collect with :func:`collect_own_result`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from train.launch.checks import Checked, Refusal
from train.launch.contract import RunContext
from train.launch.energy import Energy, apply_energy
from train.launch.job_guard import Signals
from utils.files.disk import OutputDirError
from utils.io.output_path import LOCK_DIR
from utils.machine.hardware import collect_gpu_info, gpu_info_without_runtime
from utils.machine.slurm import slurm_ending
from utils.result.failures import cause_in_log, is_interrupted
from utils.result.file import ResultError, finalize_result, new_result, read_result, update_result, write_result
from utils.result.mllog import mllog_path, mlperf_record
from utils.result.step_log import recover_result, step_log_path
from utils.schema.hardware import GpuInfo
from utils.schema.measures import Source
from utils.schema.mlperf import Mlperf
from utils.schema.model import Result, result_bytes
from utils.spec.models import workload_shape

LOG_TAIL_LINES = 30
PLACEHOLDER_REASON = ("the launcher started this job and has not recorded its end (it was stopped or killed "
                      "before it could)")
# Room kept for a result: twice the most it can take as written (utils/schema/model.py ``result_bytes``: a fixed
# part, each step's array entries, each evaluation).
RESERVE_MARGIN = 2


@dataclass(frozen=True)
class Ran:
    """What a job's run left, as facts: its exit code (None: it could not start, ``error`` says why), what its
    plugin collected (an exception: the collector failed), the energy counters read around it, and the signal
    that had arrived by its end."""

    returncode: int | None
    collected: Result | Exception | None = None
    energy: Energy = (None, None)
    signal: str | None = None
    error: str | None = None


def failure_result(ctx: RunContext, status: str, reason: str, log_path: Path | None = None,
                   gpu_info: GpuInfo | None = None) -> Result:
    """A valid result that records why a job produced no measurement (its profile and what it changed named);
    ``gpu_info`` defaults to :func:`collect_gpu_info` (the placeholder passes one read without a GPU runtime)."""
    result = new_result(
        ctx.cfg, platform=ctx.platform, framework=ctx.framework, model=ctx.model,
        shape=workload_shape(ctx.cfg, ctx.model), gpu_info=gpu_info or collect_gpu_info(ctx.platform),
        run_index=ctx.run_index,
        source=Source(kind="log", log_path=str(log_path) if log_path else None),
    )
    update_result(result, profile=ctx.profile.name, profile_settings=ctx.profile.block())
    return finalize_result(result, status, reason)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return "(no log)"


class JobResult:
    """One job's result on the node that writes it: on record from before the start, composed once at the end."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        cfg = ctx.cfg
        evaluations = cfg.train_iters // max(cfg.eval_interval_steps, 1) if cfg.evaluates else 0
        self.file = ResultFile(ctx.result_path, RESERVE_MARGIN * result_bytes(cfg.train_iters, evaluations))

    def start(self) -> RunContext:
        """Room and an ``incomplete`` placeholder (``OutputDirError``: one line); a previous run's steps removed.

        Returns the context the job runs with: its plugin can tell the job's own result from the placeholder.
        """
        self.file.start(failure_result(self.ctx, "incomplete", PLACEHOLDER_REASON,
                                       gpu_info=gpu_info_without_runtime(self.ctx.platform)))
        with contextlib.suppress(FileNotFoundError):
            step_log_path(self.ctx.result_path).unlink()  # a previous run's steps must never pass for this run's
        self.ctx = replace(self.ctx, result_file=self.file)
        return self.ctx

    def write(self, signals: Signals, checked: Checked | Refusal, ran: Ran | None = None) -> int:
        """Emit the result and write it; the launcher's exit code (0 ok, 128 + signal when stopped, else 1).

        When the full result cannot be written, a compact ``failed`` one is tried, else the placeholder stays.
        """
        result = self.emit(checked, ran, signals.name if signals.signum else None)
        problem = self.file.finish(result, lambda why: failure_result(self.ctx, "failed", why, self.ctx.log_path))
        if problem:
            print(f"tprimat: {problem}", file=sys.stderr)
            return signals.exit_code() or 1
        print(f"tprimat: result {self.ctx.result_path} status={result.status}"
              + (f" ({result.error})" if result.error else ""))
        return signals.exit_code() or (0 if result.status == "ok" else 1)

    def emit(self, checked: Checked | Refusal, ran: Ran | None, signal: str | None) -> Result:
        """The job's :class:`Result`, composed once: how it ended, what the checks found, the signal."""
        ctx = self.ctx
        outcome = (checked.status, checked.reason, False) if isinstance(checked, Refusal) else self._collected(ran)
        if isinstance(outcome, Result):
            result = outcome
        else:
            status, reason, from_log = outcome
            result = failure_result(ctx, status, reason, ctx.log_path if from_log else None)
        fields: dict[str, Any] = {"profile": ctx.profile.name, "profile_settings": ctx.profile.block()}
        if checked.memory is not None:
            fields.update(memory_estimate=checked.memory.record,
                          warnings=[*result.warnings, *checked.memory.verdict.warnings])
        if isinstance(checked, Checked) and checked.settings is not None:
            effective, fields["framework_versions"] = checked.settings
            own = result.effective_settings
            if own is None or not own.settings:
                fields["effective_settings"] = effective
            else:  # deep: what its engine resolved, over the configuration it was given (the same names)
                fields["effective_settings"] = own.model_copy(update={
                    "settings": {**effective.settings, **own.settings}, "env": own.env or effective.env})
        if ctx.precision is not None:  # cpu: the precision that ran and why (utils/machine/cpu_precision.py)
            fields["training_config"] = result.training_config.model_copy(update=ctx.precision.training_fields())
            settings = fields.get("effective_settings", result.effective_settings)
            if settings is not None:
                fields["effective_settings"] = settings.model_copy(
                    update={"settings": {**settings.settings, **ctx.precision.settings()}})
        update_result(result, **fields)
        if signal and result.status != "ok" and not (result.error or "").startswith("interrupted"):
            update_result(result, status="incomplete", error=f"interrupted by {signal}: {result.error}")
        ending = slurm_ending() if signal and result.status != "ok" else None
        if ending:  # the signal was Slurm's: scancel or a time limit (issue 51)
            update_result(result, error=f"{ending}: {result.error}")
        if ctx.profile.mlperf:  # MLLOG from what the run recorded, and MLPerf's checker on it (utils/result/mllog.py)
            update_result(result, mlperf=mlperf_block(result, ctx.result_path))
        return result

    def _collected(self, ran: Ran | None) -> Result | tuple[str, str, bool]:
        """The framework's own result, with the launcher's energy and the exit code's verdict; without one,
        the launcher's (status, reason, whether the job's log is its source)."""
        if ran is None or ran.returncode is None:
            return "failed", (ran.error if ran else None) or "the job did not start", False
        collected = ran.collected
        if isinstance(collected, Result):
            try:
                apply_energy(self.ctx, collected, *ran.energy)
            except Exception as exc:  # a collector bug must still leave a result
                collected = exc
            else:
                if ran.returncode != 0 and collected.status == "ok":
                    finalize_result(collected, "failed",
                                    f"process exited with code {ran.returncode} after reporting success")
                return collected
        if isinstance(collected, Exception):
            return "failed", f"collecting the result failed: {type(collected).__name__}: {collected}", True
        reason = f"exit code {ran.returncode} and no result was produced; log tail:\n{log_tail(self.ctx.log_path)}"
        if is_interrupted(ran.returncode) or ran.signal:
            by = f" by {ran.signal}" if ran.signal else ""
            return "incomplete", f"interrupted{by} ({reason})", True
        return "failed", reason, True


def mlperf_block(result: Result, result_path: Path) -> Mlperf:
    """The ``mlperf`` block of a PROFILE=mlperf result; a failure to write the MLLOG is its reason, never a crash."""
    try:
        return mlperf_record(result, mllog_path(result_path))
    except Exception as exc:  # the result must still be written
        return Mlperf(benchmark="llama31_8b", derived_from="tprimat", not_a_submission="not an MLPerf submission",
                      reason=f"writing or checking the MLLOG failed: {type(exc).__name__}: {exc}")


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


class ResultFile:
    """One job's result file from before the start to the end (only the node that writes it uses this)."""

    def __init__(self, path: Path, reserve_bytes: int) -> None:
        self.path = Path(path)
        self.size = reserve_bytes
        self.reserve = self.path.parent / LOCK_DIR / f"{self.path.name}.reserve"
        self._placeholder: tuple[int, int, int] | None = None

    def start(self, placeholder: Result) -> None:
        """Set room aside, then replace any older result with ``placeholder``. Raises OutputDirError (one line)."""
        try:
            self.reserve.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)
            finally:
                os.close(fd)
        except OSError as exc:
            self.release()
            raise OutputDirError(f"OUTPUT_DIR={self.path.parent} has no room for the result of this job "
                                 f"({self.size // 1024} KiB): {exc.strerror or exc}") from None
        try:
            write_result(self.path, placeholder)
        except OSError as exc:
            self.release()
            with contextlib.suppress(OSError):
                self.path.unlink()  # an older result must never pass for this run's
            raise OutputDirError(f"cannot write the result {self.path}: {exc.strerror or exc}") from None
        self._placeholder = _identity(self.path)

    def is_placeholder(self) -> bool:
        """True while the file is still the placeholder (the job itself wrote no result over it)."""
        return self._placeholder is not None and _identity(self.path) == self._placeholder

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.reserve.unlink()

    def finish(self, result: Result, compact: Callable[[str], Result]) -> str | None:
        """Write the final result; None, or a one-line problem when it could not be written as it is.

        ``compact(problem)`` builds the small ``failed`` result tried when the full one cannot
        be written; when neither can, the placeholder (``incomplete``) stays.
        """
        self.release()
        try:
            write_result(self.path, result)
            return None
        except (OSError, ResultError) as exc:
            problem = f"cannot write the result {self.path}: {getattr(exc, 'strerror', None) or exc}"
        try:
            write_result(self.path, compact(problem))
            return f"{problem}; wrote a failed result without the per-step arrays instead"
        except (OSError, ResultError):
            kept = "the placeholder (incomplete) stays" if self.is_placeholder() else "the file is as the job left it"
            return f"{problem}; {kept}"


# ---------------------------------------------------------------------------
# collect of the plugins that measure in-process


def read_own_result(ctx: RunContext) -> Result | None:
    """The result the training process itself wrote, or None if absent/invalid (or still the placeholder)."""
    if ctx.result_file is not None and ctx.result_file.is_placeholder():
        return None
    try:
        return read_result(ctx.result_path)
    except ResultError:
        return None


def collect_own_result(ctx: RunContext, returncode: int) -> Result | None:
    """``collect`` of the in-process plugins (tran, deep, nemo): the result global rank 0 wrote.

    Without one: the steps rank 0 recorded (``utils/result/step_log.py``) as an ``incomplete`` result with the cause;
    else a result naming the cause in the log (``utils/result/failures.py``); with none, None, and the launcher records
    the exit code and the log's tail.
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
