"""Shared launcher: one code path from a ``train_<platform>_<framework>_<model>.sh`` to a result file.

The launcher keeps backends apart from launching (as optimum-benchmark does): each
framework is a package with a plugin module that implements :class:`train.launch.contract.Plugin`
(``plan``, ``collect``, ``resolve``, ``framework_trees``); this file knows frameworks only
through that contract. Which module is a framework's plugin, and which node of a multi-node
job writes its result, are entries of ``utils/config/registry.py``.

Before a job starts (every framework alike): ``OUTPUT_DIR`` must take results
(``utils/files/disk.py``), the result file's lock must be free (``utils/files/locks.py``: one
launcher per result file), room for the result is set aside and an ``incomplete``
placeholder replaces any older result (``train/launch/job_guard.py``), the rendezvous port
must be free, and the dataset must be the config's and verified (``data/ready.py``).
A failure there is one line, plus a ``failed`` result when the result can be written.

Then the launcher writes generated files, runs the command with its output tee'd to
a log, forwards SIGINT/SIGTERM to the whole process group (and exits with 128 + the
signal after recording the job ``incomplete``), and guarantees that a result file
exists afterwards: a crash, a non-zero exit or a missing result all become ``status:
failed|incomplete`` with the reason and the log's tail; a trainer killed before it
wrote its result is recovered from its per-step record (``utils/result/step_log.py``).

These steps are one ordered sequence every framework shares; each step's logic lives in the
module named beside it; this file holds their order and the CLI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from train.launch.context import job_context, load_plugin
from train.launch.contract import LaunchPlan, Plugin, PreflightError, RunContext
from train.launch.energy import apply_energy, energy_trace
from train.launch.job_guard import ResultFile, Signals, port_problem, run_logged
from train.launch.job_result import failure_result
from train.launch.jobs import resolve_framework
from train.launch.memory_check import check_memory
from train.launch.preflight import before_launch
from train.launch.preflight import main as preflight_main
from train.logs.patterns import launch_header
from train.profiles import ProfileError
from train.settings.samples import dry_run_note
from utils.config.load import ConfigError, load_config
from utils.config.registry import FRAMEWORKS, framework_names, model_names, platform_names
from utils.dataset.fingerprint import config_hash
from utils.files.disk import OutputDirError, check_writable_dir
from utils.files.locks import LockError, LockHeld, hold, result_lock_path
from utils.machine.hardware import detect_platform
from utils.result.failures import is_interrupted
from utils.result.file import finalize_result, update_result
from utils.result.model import EffectiveSettings, FrameworkVersions, Result
from utils.result.step_log import step_log_path

LOG_TAIL_LINES = 30


def writes_result(ctx: RunContext) -> bool:
    """Whether this node owns the job's result file.

    Only one node may write it, or nodes sharing ``OUTPUT_DIR`` would overwrite each
    other. The registry names the node that sees the measurement: ``"first"`` (global
    rank 0 measures in-process) or ``"last"`` (Megatron and Primus print their
    iteration lines on the last rank, which lives on the last node).
    """
    owner = FRAMEWORKS[ctx.framework].result_node
    return ctx.cfg.node_rank == (ctx.cfg.nnodes - 1 if owner == "last" else 0)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip()
    except OSError:
        return "(no log)"


def dataset_problem(ctx: RunContext) -> str | None:
    """Why the job's dataset must not be trained on (not the config's, changed, unverified), or None."""
    from data.common import DataError
    from data.ready import check_dataset

    try:
        check_dataset(ctx.cfg, ctx.model)
    except (DataError, OSError) as exc:
        return f"dataset not usable: {exc}"
    return None


def start_problems(ctx: RunContext, plan: LaunchPlan) -> list[str]:
    """What stops the job before it starts: a taken rendezvous port (node 0 binds it), an unusable dataset."""
    problems = []
    port_flag = f"--master-port={ctx.cfg.master_port}"
    if ctx.cfg.node_rank == 0 and port_flag in plan.argv:
        problems.append(port_problem(ctx.cfg.master_port))
    if plan.reads_dataset:
        problems.append(dataset_problem(ctx))
    return [problem for problem in problems if problem]


def launch(ctx: RunContext, plugin: Plugin, dry_run: bool = False) -> int:
    """Plan, check, run and collect one job; 0 when its result says ok, 128 + signal when stopped, else 1."""
    if dry_run:
        plan = plugin.plan(replace(ctx, dry_run=True))
        plan.profile = ctx.profile.render()
        plan.notes += [f"{problem} (a real run stops here)" for problem in start_problems(ctx, plan)]
        plan.notes.append(check_memory(ctx, plugin, plan, ctx.force).dry_run_note())
        digest = dry_run_note(ctx.cfg, ctx.model)
        plan.notes += [digest] if digest else []
        sys.stdout.write(plan.render())
        return 0
    with Signals() as signals:
        try:
            check_writable_dir(ctx.cfg.output_dir)
            if not writes_result(ctx):
                return _run_unrecorded(ctx, plugin, signals)
            with hold(result_lock_path(ctx.result_path), f"the result {ctx.result_path.name}"):
                return _run_recorded(ctx, plugin, signals)
        except (OutputDirError, LockHeld, LockError) as exc:
            print(f"tprimat: {exc}", file=sys.stderr)
            return signals.exit_code() or 1


def _run_unrecorded(ctx: RunContext, plugin: Plugin, signals: Signals) -> int:
    """A node that does not write the job's result: plan, check and run only."""
    try:
        plan = plugin.plan(ctx)
    except (ValueError, FileNotFoundError) as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return 1
    problems = start_problems(ctx, plan) or [p for p in (check_memory(ctx, plugin, plan, ctx.force).verdict.refusal,)
                                             if p]
    if not problems:
        problems = [problem for problem in (_preflight(ctx, plugin, plan)[1],) if problem]
    if problems or signals.signum:
        print(f"tprimat: {'; '.join(problems) or f'interrupted by {signals.name}'}", file=sys.stderr)
        return signals.exit_code() or 1
    print(f"tprimat: {ctx.platform}/{ctx.framework}/{ctx.model}: {shlex.join(plan.argv)}", flush=True)
    returncode = run_logged(plan.argv, _env(plan), plan.cwd, plan.files, ctx.log_path, signals, _header(ctx))
    print(f"tprimat: node {ctx.cfg.node_rank} exited with code {returncode}; "
          f"the result {ctx.result_path.name} is written by the node that measures")
    return signals.exit_code() or (0 if returncode == 0 else 1)


def _header(ctx: RunContext) -> str:
    """The log's first line: marks it as a tprimat launch of this workload (``train/logs/patterns.py``)."""
    return launch_header(ctx.platform, ctx.framework, ctx.model, ctx.run_index, config_hash(ctx.cfg))


def _env(plan: LaunchPlan) -> dict[str, str]:
    return {**os.environ, **plan.env, "PYTHONUNBUFFERED": "1"}


def _run_recorded(ctx: RunContext, plugin: Plugin, signals: Signals) -> int:
    """The node that writes the result: a placeholder first, then whatever ends the job ends in a result."""
    result_file = ResultFile(ctx.result_path, ctx.cfg.train_iters)
    result_file.start(failure_result(
        ctx, "incomplete", "the launcher started this job and has not recorded its end (it was stopped or killed "
        "before it could)"))
    ctx = replace(ctx, result_file=result_file)
    with contextlib.suppress(FileNotFoundError):
        step_log_path(ctx.result_path).unlink()  # a previous run's steps must never pass for this run's
    result = _result_of_run(ctx, plugin, signals)
    if signals.signum and result.status != "ok" and not (result.error or "").startswith("interrupted"):
        update_result(result, status="incomplete", error=f"interrupted by {signals.name}: {result.error}")
    problem = result_file.finish(result, lambda why: failure_result(ctx, "failed", why, ctx.log_path))
    if problem:
        print(f"tprimat: {problem}", file=sys.stderr)
        return signals.exit_code() or 1
    print(f"tprimat: result {ctx.result_path} status={result.status}" + (f" ({result.error})" if result.error else ""))
    return signals.exit_code() or (0 if result.status == "ok" else 1)


def _result_of_run(ctx: RunContext, plugin: Plugin, signals: Signals) -> Result:
    """Plan, check and run the job; the result it ends in, however it ends."""
    try:
        plan = plugin.plan(ctx)
    except (ValueError, FileNotFoundError) as exc:
        print(f"tprimat: {exc}", file=sys.stderr)
        return failure_result(ctx, "failed", str(exc))
    except Exception as exc:  # a planner bug must still leave a result
        print(f"tprimat: planning the job failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return failure_result(ctx, "failed", f"planning the job failed: {type(exc).__name__}: {exc}")
    memory = check_memory(ctx, plugin, plan, ctx.force)
    for warning in memory.verdict.warnings:
        print(f"tprimat: warning: {warning}", file=sys.stderr)

    def stopped(status: str, reason: str) -> Result:  # a job that never started, with the memory check's record
        return update_result(failure_result(ctx, status, reason), memory_estimate=memory.record,
                             warnings=list(memory.verdict.warnings))

    if memory.verdict.refusal:
        print(f"tprimat: {memory.verdict.refusal} (--force runs it anyway)", file=sys.stderr)
        return stopped("failed", memory.verdict.refusal)
    problems = start_problems(ctx, plan)
    if problems:
        for problem in problems:
            print(f"tprimat: {problem}", file=sys.stderr)
        return stopped("failed", "; ".join(problems))
    checked, problem = _preflight(ctx, plugin, plan)
    if problem:
        print(f"tprimat: {problem}", file=sys.stderr)
        return stopped("failed", problem)
    if signals.signum:
        return stopped("incomplete", f"interrupted by {signals.name} before the job started")
    result = _run_and_collect(ctx, plugin, plan, signals)
    assert checked is not None
    effective, versions = checked
    fields: dict[str, Any] = {"framework_versions": versions, "profile": ctx.profile.name,
                              "profile_settings": ctx.profile.block(), "memory_estimate": memory.record,
                              "warnings": [*result.warnings, *memory.verdict.warnings]}
    own = result.effective_settings
    if own is None or not own.settings:
        fields["effective_settings"] = effective
    else:  # deep: what its engine resolved, over the configuration it was given (the same names)
        fields["effective_settings"] = own.model_copy(update={"settings": {**effective.settings, **own.settings},
                                                             "env": own.env or effective.env})
    update_result(result, **fields)
    return result


def _preflight(ctx: RunContext, plugin: Plugin, plan: LaunchPlan) -> tuple[
        tuple[EffectiveSettings, FrameworkVersions] | None, str | None]:
    """(effective settings and framework versions, None), or (None, the one-line reason the job must not start).

    The framework's own code resolves the settings and they are checked against config.env
    and the fairness table (``train/launch/preflight.py``), so a GPU hour is never spent on a run
    that would crash at model build or run other settings. A plugin may bring its own
    ``preflight(ctx, plan)`` (test stand-ins do).
    """
    check = getattr(plugin, "preflight", None) or before_launch
    print(f"tprimat: preflight of {ctx.platform}/{ctx.framework}/{ctx.model} ...", flush=True)
    try:
        return check(ctx, plan), None
    except PreflightError as exc:
        return None, f"preflight: {exc}"


def _run_and_collect(ctx: RunContext, plugin: Plugin, plan: LaunchPlan, signals: Signals) -> Result:
    """Run the planned job and collect its result, however it ends."""
    print(f"tprimat: {ctx.platform}/{ctx.framework}/{ctx.model}: {shlex.join(plan.argv)}", flush=True)
    try:
        with energy_trace(ctx) as (trace, trace_reason):  # every GPU's energy counter, from outside the job
            returncode = run_logged(plan.argv, _env(plan), plan.cwd, plan.files, ctx.log_path, signals,
                                    _header(ctx))
    except OSError as exc:  # the generated files or the log cannot be written
        return failure_result(ctx, "failed", f"cannot start the job: {exc.strerror or exc}: {exc.filename or ''}")
    try:
        result = plugin.collect(ctx, plan, returncode)
        if result is not None:
            apply_energy(ctx, result, trace, trace_reason)
    except Exception as exc:  # a collector bug must still leave a result
        result = failure_result(ctx, "failed", f"collecting the result failed: {type(exc).__name__}: {exc}",
                                ctx.log_path)
    if result is None:
        reason = f"exit code {returncode} and no result was produced; log tail:\n{log_tail(ctx.log_path)}"
        if is_interrupted(returncode) or signals.signum:
            by = f" by {signals.name}" if signals.signum else ""
            result = failure_result(ctx, "incomplete", f"interrupted{by} ({reason})", ctx.log_path)
        else:
            result = failure_result(ctx, "failed", reason, ctx.log_path)
    elif returncode != 0 and result.status == "ok":
        finalize_result(result, "failed", f"process exited with code {returncode} after reporting success")
    return result


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
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
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
    except (ValueError, FileNotFoundError) as exc:  # planning a dry run: nothing ran, nothing to record
        print(f"tprimat: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
