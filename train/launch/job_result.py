"""A job's one result: its pieces collected as the job goes, the :class:`Result` emitted once, however the job ends.

:class:`JobResult` is the only place the launcher builds a job's result: the memory estimate, the preflight's
settings and versions, the profile, the framework's own result (or why there is none), the energy
(``train/launch/energy.py``) and the status a signal leaves, composed once in :meth:`JobResult.emit` for every
ending. The result file's life (its lock, room reserved, the ``incomplete`` placeholder, the final update and write
with its fallbacks) is ``utils/files/result_file.py``'s ``ResultFile``, put on record once and finished once from here.
In-process plugins (``tran``, ``deep``, ``nemo``) collect with :func:`collect_own_result`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from train.launch.checks import Checked, Refusal
from train.launch.contract import RunContext
from train.launch.energy import Energy, apply_energy
from train.launch.job_guard import Signals
from utils.files.result_file import JobExit, JobFacts, ResultFile, Verdict, ended_result, failure_result
from utils.machine.slurm import slurm_ending
from utils.result.failures import cause_in_log, is_interrupted
from utils.result.file import ResultError, read_result
from utils.result.step_log import recover_result, step_log_path
from utils.schema.model import Result


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


def job_facts(ctx: RunContext) -> JobFacts:
    """What every result of the job states, however it ends, read off its context once."""
    return JobFacts(ctx.cfg, ctx.platform, ctx.framework, ctx.model, ctx.run_index, ctx.profile.name,
                    ctx.profile.block(), ctx.log_path)


class JobResult:
    """One job's result on the node that writes it: on record from before the start, composed once at the end."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.file = ResultFile(ctx.result_path, job_facts(ctx))

    @contextlib.contextmanager
    def on_record(self) -> Iterator[RunContext]:
        """The block runs with the result file locked and on record (``ResultFile.on_record``: ``LockHeld`` or
        ``OutputDirError``, one line), and with the context the job runs with: its plugin can tell the job's own
        result from the placeholder."""
        with self.file.on_record():
            self.ctx = replace(self.ctx, result_file=self.file)
            yield self.ctx

    def write(self, signals: Signals, checked: Checked | Refusal, ran: Ran | None = None) -> int:
        """Emit the result and write it; the launcher's exit code (0 ok, 128 + signal when stopped, else 1).

        When the full result cannot be written, a compact ``failed`` one is tried, else the placeholder stays.
        """
        result, updates = self.emit(checked, ran, signals.name if signals.signum else None)
        problem = self.file.finish(result, updates, mlperf=self.ctx.profile.mlperf)
        if problem:
            print(f"tprimat: {problem}", file=sys.stderr)
            return signals.exit_code() or 1
        print(f"tprimat: result {self.ctx.result_path} status={result.status}"
              + (f" ({result.error})" if result.error else ""))
        return signals.exit_code() or (0 if result.status == "ok" else 1)

    def emit(self, checked: Checked | Refusal, ran: Ran | None, signal: str | None) -> tuple[Result, dict[str, Any]]:
        """The job's :class:`Result` and the fields that complete it, composed once: how it ended, what the checks
        found, the profile, the signal (``ResultFile.finish`` applies them in one step, with the MLLOG block)."""
        ctx = self.ctx
        ending = (checked.status, checked.reason, False) if isinstance(checked, Refusal) else self._collected(ran)
        result = ended_result(self.file.job, ending)
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
        if signal and result.status != "ok":  # the signal's word on a job that did not end ok
            if not (result.error or "").startswith("interrupted"):
                fields.update(status="incomplete", error=f"interrupted by {signal}: {result.error}")
            ending = slurm_ending()
            if ending:  # the signal was Slurm's: scancel or a time limit (issue 51)
                fields["error"] = f"{ending}: {fields.get('error', result.error)}"
        return result, fields

    def _collected(self, ran: Ran | None) -> JobExit | Verdict:
        """What the job left: the framework's own result with the launcher's energy (or none) and its exit code;
        without a run or a usable result, the launcher's (status, reason, whether the job's log is its source)."""
        if ran is None or ran.returncode is None:
            return "failed", (ran.error if ran else None) or "the job did not start", False
        collected = ran.collected
        if isinstance(collected, Result):
            try:
                apply_energy(self.ctx, collected, *ran.energy)
            except Exception as exc:  # a collector bug must still leave a result
                collected = exc
        if isinstance(collected, Exception):
            return "failed", f"collecting the result failed: {type(collected).__name__}: {collected}", True
        return JobExit(collected, ran.returncode, ran.signal)


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
    return failure_result(job_facts(ctx), status,
                          f"{cause.kind}: {cause.text} (exit code {returncode}; no result was written)", from_log=True)
