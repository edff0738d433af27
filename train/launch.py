"""Shared launcher: one code path from a ``train_<platform>_<framework>_<model>.sh`` to a result file.

The launcher keeps backends apart from launching (as optimum-benchmark does):
each framework is a plugin module with two functions,

* ``plan(ctx) -> LaunchPlan``: the exact command, the environment it sets and any
  files it generates (Primus YAML, ...); pure, so ``--dry-run`` and tests can show it;
* ``collect(ctx, plan, returncode) -> Result | None``: the typed result after the
  process ended (read the in-process monitor's file, or extract the log).

Which module is a framework's plugin, and which node of a multi-node job writes its
result, are entries of ``utils/registry.py``.

The launcher writes generated files, runs the command with its output tee'd to a
log, forwards SIGINT/SIGTERM to the whole process group, and guarantees that a
result file exists afterwards: a crash, a non-zero exit or a missing result all
become ``status: failed|incomplete`` with the reason and the log's tail.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from train.profiles import IDENTICAL, AppliedProfile, ProfileError, apply_profile
from utils.atomic import atomic_write_text
from utils.configure import Config, ConfigError, load_config
from utils.failures import cause_in_log, is_interrupted
from utils.hardware import collect_gpu_info, detect_platform
from utils.models import get_shape
from utils.registry import FRAMEWORKS, framework_names, model_names, platform_names
from utils.result import (
    ResultError,
    finalize_result,
    new_result,
    read_result,
    result_path,
    update_result,
    write_result,
)
from utils.result_model import Result, Source

LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class RunContext:
    """Everything a plugin needs to plan and collect one job."""

    cfg: Config
    platform: str
    framework: str
    model: str
    run_index: int | None
    result_path: Path
    log_path: Path
    # True while planning for --dry-run: a plugin may then report missing inputs as notes, not errors.
    dry_run: bool = False
    # PROFILE as applied to this job (train/profiles/): ``cfg`` already carries a tuned recipe's workload.
    profile: AppliedProfile = IDENTICAL


@dataclass
class LaunchPlan:
    """What will run: exact argv, the environment it adds, files it needs written first."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    files: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Where the command writes its own output besides stdout (e.g. Primus's TRAIN_LOG).
    extra_logs: list[Path] = field(default_factory=list)
    # The profile's settings with their sources (train/profiles/), shown by --dry-run.
    profile: list[str] = field(default_factory=list)

    def render(self) -> str:
        """Human-readable dry-run text: command, environment, generated files."""
        lines = ["# command", shlex.join(self.argv), ""]
        if self.cwd:
            lines += ["# working directory", str(self.cwd), ""]
        lines.append("# environment set by tprimat")
        lines += [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())] or ["(none)"]
        for path, text in self.files.items():
            lines += ["", f"# generated file: {path}", text.rstrip("\n")]
        for note in self.notes:
            lines += ["", f"# note: {note}"]
        if self.profile:
            lines += ["", "# profile"] + [f"# {line}" for line in self.profile]
        return "\n".join(lines) + "\n"


class Plugin(Protocol):
    def plan(self, ctx: RunContext) -> LaunchPlan: ...

    def collect(self, ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result | None: ...


def torchrun_argv(cfg: Config, nproc_per_node: int | None = None) -> list[str]:
    """``torchrun`` (as ``python -m torch.distributed.run``) with the config's rendezvous arguments.

    Multi-node runs (NNODES>1) pass ``--nnodes/--node-rank/--master-addr/--master-port``
    so every node joins the same job; single-node runs pass the same arguments,
    which keeps the command identical in shape.
    """
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nproc-per-node={nproc_per_node or cfg.gpus_per_node}",
        f"--nnodes={cfg.nnodes}",
        f"--node-rank={cfg.node_rank}",
        f"--master-addr={cfg.master_addr}",
        f"--master-port={cfg.master_port}",
    ]


def job_context(cfg: Config, platform: str, framework: str, model: str, run_index: int | None = None,
                dry_run: bool = False) -> RunContext:
    """One job's context with PROFILE applied (:class:`train.profiles.ProfileError` when it cannot be)."""
    cfg, profile = apply_profile(cfg, platform, framework, model)
    return RunContext(cfg=cfg, platform=platform, framework=framework, model=model, run_index=run_index,
                      result_path=result_path(cfg.output_dir, platform, framework, model, run_index, cfg.profile),
                      log_path=log_path_for(cfg, platform, framework, model, run_index), dry_run=dry_run,
                      profile=profile)


def with_profile(ctx: RunContext, result: Result) -> Result:
    """The job's profile recorded in its result: the profile that ran and what it changed (train/profiles/)."""
    return update_result(result, profile=ctx.profile.name, profile_settings=ctx.profile.block())


def log_path_for(cfg: Config, platform: str, framework: str, model: str, run_index: int | None) -> Path:
    """The job's log; with several nodes each node keeps its own (``..._node<k>.log``) on shared storage."""
    path = result_path(cfg.output_dir / "logs", platform, framework, model, run_index, cfg.profile).with_suffix(".log")
    return path.with_name(f"{path.stem}_node{cfg.node_rank}.log") if cfg.nnodes > 1 else path


def writes_result(ctx: RunContext) -> bool:
    """Whether this node owns the job's result file.

    Only one node may write it, or nodes sharing ``OUTPUT_DIR`` would overwrite each
    other. The registry names the node that sees the measurement: ``"first"`` (global
    rank 0 measures in-process) or ``"last"`` (Megatron and Primus print their
    iteration lines on the last rank, which lives on the last node).
    """
    owner = FRAMEWORKS[ctx.framework].result_node
    return ctx.cfg.node_rank == (ctx.cfg.nnodes - 1 if owner == "last" else 0)


def load_plugin(framework: str) -> Plugin:
    """The framework's launcher plugin, the module named in ``utils/registry.py``."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework {framework!r}: allowed values are {', '.join(FRAMEWORKS)}")
    return importlib.import_module(FRAMEWORKS[framework].plugin)  # type: ignore[return-value]


def failure_result(ctx: RunContext, status: str, reason: str, log_path: Path | None = None) -> Result:
    """A valid result that records why a job produced no measurement."""
    shape = get_shape(ctx.model, ctx.cfg.model_size)
    result = new_result(
        ctx.cfg, platform=ctx.platform, framework=ctx.framework, model=ctx.model, shape=shape,
        gpu_info=collect_gpu_info(ctx.platform), run_index=ctx.run_index,
        source=Source(kind="log", log_path=str(log_path) if log_path else None),
    )
    return finalize_result(with_profile(ctx, result), status, reason)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return "(no log)"


def run_plan(plan: LaunchPlan, log_path: Path) -> int:
    """Run the command, tee its output to ``log_path``, forward SIGINT/SIGTERM; return its exit code."""
    for path, text in plan.files.items():
        atomic_write_text(path, text)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **plan.env, "PYTHONUNBUFFERED": "1"}
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            proc = subprocess.Popen(
                plan.argv, cwd=plan.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True, text=True, errors="replace", bufsize=1,
            )
        except OSError as exc:
            log.write(f"tprimat: cannot start {plan.argv[0]}: {exc}\n")
            return 127

        def forward(signum: int, _frame: Any) -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
            return proc.wait()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            sys.stdout.flush()


def launch(ctx: RunContext, plugin: Plugin, dry_run: bool = False) -> int:
    """Plan, (dry-)run and collect one job; 0 when its result says ok."""
    plan = plugin.plan(replace(ctx, dry_run=dry_run))
    plan.profile = ctx.profile.render()
    if dry_run:
        sys.stdout.write(plan.render())
        return 0
    print(f"tprimat: {ctx.platform}/{ctx.framework}/{ctx.model}: {shlex.join(plan.argv)}", flush=True)
    if not writes_result(ctx):
        returncode = run_plan(plan, ctx.log_path)
        print(f"tprimat: node {ctx.cfg.node_rank} exited with code {returncode}; "
              f"the result {ctx.result_path.name} is written by the node that measures")
        return 0 if returncode == 0 else 1
    ctx.result_path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        ctx.result_path.unlink()  # a stale result must never pass for this run's
    returncode = run_plan(plan, ctx.log_path)
    try:
        result = plugin.collect(ctx, plan, returncode)
    except Exception as exc:  # a collector bug must still leave a result
        result = failure_result(ctx, "failed", f"collecting the result failed: {type(exc).__name__}: {exc}",
                                ctx.log_path)
    if result is None:
        reason = f"exit code {returncode} and no result was produced; log tail:\n{log_tail(ctx.log_path)}"
        if is_interrupted(returncode):
            result = failure_result(ctx, "incomplete", f"interrupted ({reason})", ctx.log_path)
        else:
            result = failure_result(ctx, "failed", reason, ctx.log_path)
    elif returncode != 0 and result.status == "ok":
        finalize_result(result, "failed", f"process exited with code {returncode} after reporting success")
    write_result(ctx.result_path, with_profile(ctx, result))
    print(f"tprimat: result {ctx.result_path} status={result.status}" + (f" ({result.error})" if result.error else ""))
    return 0 if result.status == "ok" else 1


def read_own_result(ctx: RunContext) -> Result | None:
    """The result the training process itself wrote, or None if absent/invalid."""
    try:
        return read_result(ctx.result_path)
    except ResultError:
        return None


def collect_own_result(ctx: RunContext, returncode: int) -> Result | None:
    """``collect`` of the in-process plugins (tran, nemo): the result global rank 0 wrote.

    Without one, a result naming the cause found in the log (out of memory, NCCL/RCCL,
    NaN, as ``utils/failures.py`` classifies it); with no such cause (a generic
    exception says less than the traceback around it), None, and the launcher records
    the exit code and the log's tail.
    """
    result = read_own_result(ctx)
    if result is not None:
        return result
    cause = cause_in_log(ctx.log_path)
    if cause is None or cause.kind == "exception":
        return None
    status = "incomplete" if is_interrupted(returncode) else "failed"
    return failure_result(ctx, status, f"{cause.kind}: {cause.text} (exit code {returncode}; no result was written)",
                          ctx.log_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.launch",
        description="Run one tprimat training job (platform x framework x model) and write its unified result.",
    )
    parser.add_argument("--platform", required=True, choices=platform_names())
    parser.add_argument("--framework", required=True, choices=framework_names())
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k (result ..._r<k>.json)")
    parser.add_argument("--dry-run", action="store_true", help="print the command, environment and files; run nothing")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    from train.jobs import resolve_framework

    try:
        framework, note = resolve_framework(args.platform, args.framework)
    except ValueError as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return 2
    if note:
        print(f"tprimat: {note}", file=sys.stderr)
    if args.run_index is not None and args.run_index < 1:
        print("tprimat: --run-index must be at least 1", file=sys.stderr)
        return 2
    if not args.dry_run:
        detected = detect_platform()
        if detected != args.platform:
            print(f"tprimat: warning: running the {args.platform} job on a machine detected as {detected}",
                  file=sys.stderr)
    try:
        ctx = job_context(cfg, args.platform, framework, args.model, args.run_index)
    except ProfileError as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return 2
    plugin = load_plugin(framework)
    try:
        return launch(ctx, plugin, dry_run=args.dry_run)
    except (ValueError, FileNotFoundError) as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        if args.dry_run:
            return 2
        if writes_result(ctx):
            write_result(ctx.result_path, failure_result(ctx, "failed", str(exc)))
        return 1


if __name__ == "__main__":
    sys.exit(main())
