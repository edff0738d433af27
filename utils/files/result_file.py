"""A launched job's result file, from before its start to its end: one owner for each turn of its life.

The node that writes a job's result (``train/launch/job_result.py``) keeps it on record with :class:`ResultFile`:
room for the final result is reserved in ``OUTPUT_DIR``'s bookkeeping folder and an ``incomplete`` placeholder
replaces any older result before the start, so even a launcher killed outright leaves a result that says so (a
finished result is never lost, issue 49); the end is one validated update and one write, a compact ``failed`` one
when the full result cannot be written, never a truncated file. The facts every such result states (the job's
config, names, profile and log) are gathered once, in :class:`JobFacts`, as plain values.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.config.model import Config
from utils.files.disk import OutputDirError
from utils.files.locks import hold, result_lock_path
from utils.io.output_path import LOCK_DIR
from utils.machine.hardware import collect_gpu_info, gpu_info_without_runtime
from utils.result.failures import is_interrupted, log_tail
from utils.result.file import ResultError, finalize_result, new_result, update_result, write_result
from utils.result.mllog import mlperf_block
from utils.result.step_log import step_log_path
from utils.schema.hardware import GpuInfo
from utils.schema.measures import Source
from utils.schema.model import Result, result_bytes
from utils.schema.run import ProfileSettings
from utils.spec.models import workload_shape

PLACEHOLDER_REASON = ("the launcher started this job and has not recorded its end (it was stopped or killed "
                      "before it could)")
# Room kept for a result: twice the most it can take as written (utils/schema/model.py ``result_bytes``: a fixed
# part, each step's array entries, each evaluation).
RESERVE_MARGIN = 2
# The launcher's own word on a job that left no result to stand as it is: (status, reason, whether its log is the
# source), for a refusal, a job that did not start, a collector that failed.
Verdict = tuple[str, str, bool]


@dataclass(frozen=True)
class JobFacts:
    """What every result of one launched job says of it, however it ends: its configuration, names, profile (the
    name and the block ``train/profiles/`` applied) and log. Gathered once by the launcher, given as plain values."""

    cfg: Config
    platform: str
    framework: str
    model: str
    run_index: int | None
    profile: str
    profile_settings: ProfileSettings | None
    log_path: Path


def failure_result(job: JobFacts, status: str, reason: str, *, from_log: bool = False,
                   gpu_info: GpuInfo | None = None) -> Result:
    """A valid result that records why a job produced no measurement (its profile and what it changed named; its
    log as the source when ``from_log``); ``gpu_info`` defaults to :func:`collect_gpu_info` (the placeholder passes
    one read without a GPU runtime)."""
    result = new_result(
        job.cfg, platform=job.platform, framework=job.framework, model=job.model,
        shape=workload_shape(job.cfg, job.model), gpu_info=gpu_info or collect_gpu_info(job.platform),
        run_index=job.run_index, source=Source(kind="log", log_path=str(job.log_path) if from_log else None),
    )
    update_result(result, profile=job.profile, profile_settings=job.profile_settings)
    return finalize_result(result, status, reason)


@dataclass(frozen=True)
class JobExit:
    """A job that ran to its exit: the result its plugin collected (None: it left none), its exit code, and the
    signal that had arrived by then."""

    result: Result | None
    returncode: int
    signal: str | None = None


def ended_result(job: JobFacts, ending: JobExit | Verdict) -> Result:
    """The result a launched job ends with, before the launcher's fields: its own, failed by its exit code when it
    reported success but its process did not; else a :func:`failure_result` with the reason (for a job that exited
    without one: its exit code and its log's tail, ``incomplete`` when a signal stopped it)."""
    if isinstance(ending, JobExit):
        own, code = ending.result, ending.returncode
        if own is not None:
            if code != 0 and own.status == "ok":
                finalize_result(own, "failed", f"process exited with code {code} after reporting success")
            return own
        reason = f"exit code {code} and no result was produced; log tail:\n{log_tail(job.log_path)}"
        by = f" by {ending.signal}" if ending.signal else ""
        ending = ("incomplete", f"interrupted{by} ({reason})", True) if is_interrupted(code) or ending.signal else \
            ("failed", reason, True)
    status, reason, from_log = ending
    return failure_result(job, status, reason, from_log=from_log)


def reserve_bytes(cfg: Config) -> int:
    """The room kept for the result of a job of ``cfg``: :data:`RESERVE_MARGIN` times the most it takes as written."""
    evaluations = cfg.train_iters // max(cfg.eval_interval_steps, 1) if cfg.evaluates else 0
    return RESERVE_MARGIN * result_bytes(cfg.train_iters, evaluations)


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


@dataclass
class ResultFile:
    """One job's result file at ``path`` from before the start to the end (only the node that writes it uses this)."""

    path: Path
    job: JobFacts
    _placeholder: tuple[int, int, int] | None = field(default=None, init=False, repr=False)

    @property
    def reserve(self) -> Path:
        return self.path.parent / LOCK_DIR / f"{self.path.name}.reserve"

    def start(self) -> None:
        """Set room aside, replace any older result with the ``incomplete`` placeholder and remove a previous run's
        step record (its steps must never pass for this run's). Raises OutputDirError (one line)."""
        placeholder = failure_result(self.job, "incomplete", PLACEHOLDER_REASON,
                                     gpu_info=gpu_info_without_runtime(self.job.platform))
        size = reserve_bytes(self.job.cfg)
        try:
            self.reserve.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError as exc:
            self.release()
            raise OutputDirError(f"OUTPUT_DIR={self.path.parent} has no room for the result of this job "
                                 f"({size // 1024} KiB): {exc.strerror or exc}") from None
        try:
            write_result(self.path, placeholder)
        except OSError as exc:
            self.release()
            with contextlib.suppress(OSError):
                self.path.unlink()  # an older result must never pass for this run's
            raise OutputDirError(f"cannot write the result {self.path}: {exc.strerror or exc}") from None
        self._placeholder = _identity(self.path)
        with contextlib.suppress(FileNotFoundError):
            step_log_path(self.path).unlink()

    @contextlib.contextmanager
    def on_record(self) -> Iterator[None]:
        """The block runs holding the result's lock (``utils/files/locks.py``: one launcher per result file, a
        second refused naming the holder) after :meth:`start`; the lock is released when it ends, however."""
        with hold(result_lock_path(self.path), f"the result {self.path.name}"):
            self.start()
            yield

    def is_placeholder(self) -> bool:
        """True while the file is still the placeholder (the job itself wrote no result over it)."""
        return self._placeholder is not None and _identity(self.path) == self._placeholder

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.reserve.unlink()

    def finish(self, result: Result, updates: dict[str, Any], mlperf: bool = False) -> str | None:
        """Apply ``updates`` to ``result`` in one validated step (and, for a PROFILE=mlperf run, the ``mlperf`` block
        from what it then records), then write it: None, or a one-line problem when it could not be written as it is.

        The small ``failed`` result (no per-step arrays) is tried when the full one cannot be written; when neither
        can, the placeholder (``incomplete``) stays.
        """
        update_result(result, **updates)
        if mlperf:
            update_result(result, mlperf=mlperf_block(result, self.path))
        self.release()
        try:
            write_result(self.path, result)
            return None
        except (OSError, ResultError) as exc:
            problem = f"cannot write the result {self.path}: {getattr(exc, 'strerror', None) or exc}"
        try:
            write_result(self.path, failure_result(self.job, "failed", problem, from_log=True))
            return f"{problem}; wrote a failed result without the per-step arrays instead"
        except (OSError, ResultError):
            kept = "the placeholder (incomplete) stays" if self.is_placeholder() else "the file is as the job left it"
            return f"{problem}; {kept}"
