"""Shared launcher: one code path from a ``train_<platform>_<framework>_<model>.sh`` to a result file.

Backends are kept apart from launching (as optimum-benchmark does): each framework's plugin implements
:class:`train.launch.contract.Plugin`, and ``utils/spec/registry.py`` names the plugin module and the node that
writes the result. A job's life (docs/ARCHITECTURE.md, "A job's life"), the same for every framework:
:func:`launch` claims the result file (``utils/files/locks.py``, ``train/launch/job_result.py``);
:func:`check_job`, written once for the dry run and both kinds of node, runs the plan, the start checks
(``train/launch/checks.py``: memory, rendezvous port, dataset) and the preflight; the command runs with its output
tee'd to a log and signals forwarded (``train/launch/job_guard.py``), energy sampled around it
(``train/launch/energy.py``); the plugin's ``collect`` reads the result and
:class:`train.launch.job_result.JobResult` writes it. Exit 0 (ok), 1, or 128 + the signal that stopped it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from dataclasses import replace

from train.launch.checks import Checked, Refusal, check_start
from train.launch.context import job_context, load_plugin
from train.launch.contract import LaunchPlan, Plugin, PreflightError, RunContext
from train.launch.energy import Energy, energy_trace
from train.launch.job_guard import Signals, job_scratch, run_logged
from train.launch.job_result import JobResult, Ran
from train.launch.jobs import resolve_framework
from train.launch.preflight import before_launch
from train.launch.preflight import main as preflight_main
from train.launch.target_watch import watcher_for
from train.logs.patterns import launch_header
from train.profiles import ProfileError
from train.settings.platform_env import cache_env
from train.settings.runner import FrameworkUnavailable
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.dataset.fingerprint import config_hash
from utils.files.disk import OutputDirError, check_writable_dir
from utils.files.locks import LockError, LockHeld
from utils.io.atomic import atomic_write_text
from utils.machine.hardware import detect_platform, device_problem
from utils.schema.model import Result
from utils.spec.registry import FRAMEWORKS, framework_names, model_names, platform_names


def writes_result(ctx: RunContext) -> bool:
    """Whether this node owns the job's result file.

    Only one node may write it, or nodes sharing ``OUTPUT_DIR`` would overwrite each
    other. The registry names the node that sees the measurement: ``"first"`` (global
    rank 0 measures in-process) or ``"last"`` (Megatron and Primus print their
    iteration lines on the last rank, which lives on the last node).
    """
    owner = FRAMEWORKS[ctx.framework].result_node
    return ctx.cfg.node_rank == (ctx.cfg.nnodes - 1 if owner == "last" else 0)


# ---------------------------------------------------------------------------
# a job's life


def launch(ctx: RunContext, plugin: Plugin, dry_run: bool = False) -> int:
    """Check, run and collect one job into its one result; 0 when it says ok, 128 + signal when stopped, else 1.

    A dry run prints the checked plan and runs nothing (2: it cannot be planned).
    """
    if dry_run:
        return show_plan(replace(ctx, dry_run=True), plugin)
    with Signals() as signals:
        try:
            check_writable_dir(ctx.cfg.output_dir)
            if not writes_result(ctx):
                return _run_unrecorded(ctx, plugin, signals)
            job = JobResult(ctx)
            with job.on_record() as ctx:  # locked and on record before the checks: however the job ends, one result
                checked = check_job(ctx, plugin, signals)
                ran = None if isinstance(checked, Refusal) else _run_and_collect(ctx, plugin, checked.plan, signals)
                return job.write(signals, checked, ran)
        except (OutputDirError, LockHeld, LockError) as exc:
            print(f"tprimat: {exc}", file=sys.stderr)
            return signals.exit_code() or 1


def show_plan(ctx: RunContext, plugin: Plugin) -> int:
    """``--dry-run``: the command, environment and files, with what each check found as notes."""
    checked = check_job(ctx, plugin)
    if isinstance(checked, Refusal):
        return 2
    plan = checked.plan
    plan.profile = ctx.profile.render()
    plan.notes += checked.notes
    sys.stdout.write(plan.render())
    return 0


def check_job(ctx: RunContext, plugin: Plugin, signals: Signals | None = None) -> Checked | Refusal:
    """The checks before a job, in their one order: plan, the start checks (memory, rendezvous port, dataset:
    ``train/launch/checks.py``), preflight.

    A dry run has every check but the preflight, prints nothing and is refused only when it cannot be planned. A real
    run prints each finding in one line and is refused by the first that stops it (``--force`` passes the memory
    check), or by a signal before the start.
    """
    try:
        plan = plugin.plan(ctx)
    except (ValueError, FileNotFoundError) as exc:
        return _refuse(str(exc))
    except Exception as exc:  # a planner bug must still leave a result
        return _refuse(f"planning the job failed: {type(exc).__name__}: {exc}")
    found = check_start(ctx, plugin, plan)
    if ctx.dry_run:
        return Checked(plan, found.memory, found.notes)
    for line in found.said:
        print(f"tprimat: {line}", file=sys.stderr)
    reason, status, settings = found.refusal, "failed", None
    if reason is None:
        print(f"tprimat: preflight of {ctx.platform}/{ctx.framework}/{ctx.model} ...", flush=True)
        try:
            settings = before_launch(ctx, plugin, plan) if plugin.preflight is None else plugin.preflight(ctx, plan)
        except (PreflightError, FrameworkUnavailable) as exc:  # a framework missing here: refused, not a crash later
            reason = f"preflight: {exc}"
        if reason is None and signals is not None and signals.signum:
            reason, status = f"interrupted by {signals.name} before the job started", "incomplete"
        if reason is not None:
            print(f"tprimat: {reason}", file=sys.stderr)
    return Refusal(reason, status, found.memory) if reason else Checked(plan, found.memory, settings=settings)


def _refuse(reason: str) -> Refusal:
    """A job that cannot be planned: said in one line, nothing checked."""
    print(f"tprimat: {reason}", file=sys.stderr)
    return Refusal(reason)


def _run_unrecorded(ctx: RunContext, plugin: Plugin, signals: Signals) -> int:
    """A node that does not write the job's result: checks and run only."""
    checked = check_job(ctx, plugin, signals)
    if isinstance(checked, Refusal):
        return signals.exit_code() or 1
    returncode, _ = _run(ctx, checked.plan, signals, contextlib.nullcontext((None, "not measured on this node")))
    print(f"tprimat: node {ctx.cfg.node_rank} exited with code {returncode}; "
          f"the result {ctx.result_path.name} is written by the node that measures")
    return signals.exit_code() or (0 if returncode == 0 else 1)


def _run_and_collect(ctx: RunContext, plugin: Plugin, plan: LaunchPlan, signals: Signals) -> Ran:
    """Run the checked job, measured, and collect what its plugin makes of it (its result's pieces, as facts)."""
    try:
        returncode, energy = _run(ctx, plan, signals, energy_trace(ctx))  # every GPU's counter, from outside
    except OSError as exc:  # the generated files or the log cannot be written
        return Ran(None, error=f"cannot start the job: {exc.strerror or exc}: {exc.filename or ''}")
    try:
        collected: Result | Exception | None = plugin.collect(ctx, plan, returncode)
    except Exception as exc:  # a collector bug must still leave a result
        collected = exc
    return Ran(returncode, collected, energy, signals.name if signals.signum else None)


def _run(ctx: RunContext, plan: LaunchPlan, signals: Signals,
         measured: contextlib.AbstractContextManager[Energy]) -> tuple[int, Energy]:
    """Run the planned command with its log, inside ``measured`` (the node's energy counters, or nothing).

    The log's first line marks it as a tprimat launch of this workload (``train/logs/patterns.py``).
    """
    if ctx.precision is not None:  # cpu: which precision runs and why (utils/machine/cpu_precision.py), once checked
        print(f"tprimat: {ctx.precision.line()}", file=sys.stderr)
    print(f"tprimat: {ctx.platform}/{ctx.framework}/{ctx.model}: {shlex.join(plan.argv)}", flush=True)
    header = launch_header(ctx.platform, ctx.framework, ctx.model, ctx.run_index, config_hash(ctx.cfg))
    env = {**os.environ, **plan.env, "PYTHONUNBUFFERED": "1"}
    watch = watcher_for(ctx.cfg, plan, ctx.log_path)  # Megatron-style jobs: evaluations stamped, the stop at the target
    for path, text in plan.files.items():  # the generated files, before anything of the job runs
        atomic_write_text(path, text)
    with job_scratch(ctx.cfg.output_dir, ctx.result_path.stem) as scratch, measured as energy:
        # torchrun's --log-dir, given as its PET_ variable (the planned command stays as the dry run shows it): its
        # per-rank folder goes in the job's scratch folder, removed after the job, not in TMPDIR for good.
        if scratch is not None:
            env.setdefault("PET_LOG_DIR", str(scratch))
        return run_logged(plan.argv, env, plan.cwd, ctx.log_path, signals, header, watch), energy


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.launch",
        description="Run one tprimat training job (platform x framework x model) and write its unified result.",
    )
    parser.add_argument("--platform", required=True, choices=platform_names())
    parser.add_argument("--framework", required=True, choices=framework_names())
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k (result ..._r<k>.json)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the command, environment and files; run nothing")
    mode.add_argument("--preflight", action="store_true",
                      help="resolve the job's effective settings with the framework's own code and check them "
                      "against config.env and the fairness table (run automatically before every real launch); "
                      "exit 0 ok, 1 a difference or a rejection, 2 the framework cannot be run here")
    parser.add_argument("--force", action="store_true",
                        help="run a job the memory check estimates cannot fit its GPU (the warning is recorded)")
    args = parser.parse_args(argv)
    cfg = load_config()
    if not args.dry_run:  # the dry run prints the plan as before
        # torch's caches under DATA_DIR, not TMPDIR or the home folder, for this process (its preflight imports
        # torch._inductor, which makes /tmp/torchinductor_<user>) and every process of the job (issue 33).
        os.environ.update(cache_env(cfg.data_dir))
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
    if args.preflight:
        return preflight_main(["--platform", args.platform, "--framework", framework, "--model", args.model])
    if not args.dry_run:
        # A GPU job on a host without that GPU (a train_<platform>_*.sh run directly, not through shell/train.sh's
        # own check): refused before anything is written, as train.sh refuses it; the dry run plans any platform.
        problem = device_problem(args.platform)
        if problem:
            print(f"tprimat: {problem}", file=sys.stderr)
            return 2
        detected = detect_platform()
        if detected != args.platform:
            print(f"tprimat: warning: running the {args.platform} job on a machine detected as {detected}",
                  file=sys.stderr)
    try:
        ctx = replace(job_context(cfg, args.platform, framework, args.model, args.run_index), force=args.force)
    except ProfileError as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return 2
    plugin = load_plugin(framework)
    try:
        return launch(ctx, plugin, dry_run=args.dry_run)
    except (ValueError, FileNotFoundError) as exc:  # a dry run's checks: nothing ran, nothing to record
        print(f"tprimat: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
