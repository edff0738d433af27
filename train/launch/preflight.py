"""Preflight: the settings a vendor job will really run, resolved by the framework's own code, checked in seconds.

Before a GPU hour is spent, each framework's plugin (``resolve(ctx, plan)``) asks its own code what it makes of
the generated configuration (:mod:`train.megatron.probe`, :mod:`train.prim.probe`, :mod:`train.nemo.probe`;
``tran`` and ``deep`` are tprimat's own). The flat record is compared with
:func:`train.settings.expected.expected_settings`; a difference or a rejection raises :class:`PreflightError`
naming the setting and both values. ``python -m train.launch.preflight --platform P --framework F --model M
[--json]`` runs it for one job; the launcher calls ``preflight(ctx, plan)`` before a real run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from typing import Any

from train.launch.context import job_context, load_plugin
from train.launch.contract import LaunchPlan, PreflightError, Resolution, RunContext
from train.profiles import ProfileError
from train.rules.cp_comm import cp_layout_problem
from train.rules.versions import framework_versions
from train.settings.expected import (
    MEGATRON_IMPL_FRAMEWORKS,
    differences,
    expected_settings,
    implementation_settings,
)
from train.settings.runner import FrameworkRejected, FrameworkUnavailable
from train.settings.samples import SamplesDiffer, SamplesUnavailable, samples_digest
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import Config
from utils.config.rules import ConfigError
from utils.dataset.sample_digest import DIGEST_KEY
from utils.schema.hardware import FrameworkVersions
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape
from utils.spec.registry import FRAMEWORKS, framework_names, model_names, platform_names

# ---------------------------------------------------------------------------
# the check


def required_for(ctx: RunContext, planned_vocab: int) -> dict[str, Any]:
    """What the job must run: config.env + the fairness table (under tuned, the recipe's settings over the
    table's), with the vocabulary the launcher planned, and MEGATRON_IMPL's settings over it for mega and prim
    (whose layers are Megatron's)."""
    shape = workload_shape(ctx.cfg, ctx.model)
    implementation = (implementation_settings(ctx.cfg.megatron_impl) if ctx.framework in MEGATRON_IMPL_FRAMEWORKS
                      else {})
    return {**expected_settings(ctx.cfg, ctx.platform, shape, planned_vocab), **ctx.profile.expected(),
            **implementation}


def required_by(ctx: RunContext) -> str:
    """Who requires the expected values, for the error message."""
    if ctx.profile.tuned and ctx.profile.recipe is not None:
        return f"the tuned recipe {ctx.profile.recipe.id} (over config.env and the fairness table) requires"
    return "config.env and the fairness table require"


def scalar_record(record: dict[str, Any]) -> dict[str, Any]:
    """Only JSON scalars (the result model's ``EffectiveSettings.settings``)."""
    return {key: value for key, value in sorted(record.items())
            if value is None or isinstance(value, (str, int, float, bool))}


def preflight(ctx: RunContext, plan: LaunchPlan) -> EffectiveSettings:
    """Resolve the job's effective settings with the framework's code and check them; the record to store.

    Raises :class:`PreflightError` (a difference or a rejection: setting and both values
    named) or :class:`train.settings.runner.FrameworkUnavailable` (framework Python or
    tree missing or at the wrong version: names MEGATRON_REF / the image variable).
    """
    if ctx.framework not in FRAMEWORKS:
        raise PreflightError(f"framework {ctx.framework!r}: no resolver (known: {', '.join(FRAMEWORKS)})")
    try:
        resolution = load_plugin(ctx.framework).resolve(ctx, plan)
    except FrameworkRejected as exc:
        raise PreflightError(str(exc), setting=exc.setting) from None
    try:
        return checked_record(ctx, plan, resolution)
    finally:
        if resolution.samples is not None and resolution.samples.built is not None:  # by the settings probe
            shutil.rmtree(resolution.samples.built.parent, ignore_errors=True)


def checked_record(ctx: RunContext, plan: LaunchPlan, resolution: Resolution) -> EffectiveSettings:
    """The resolution checked against what the job must run, with the samples digest: the record to store."""
    record, resolved_by, notes = resolution.record, resolution.resolved_by, resolution.notes
    layout = cp_layout_problem(record)  # a layout Transformer Engine cannot run, named as such (issue 40)
    if layout:
        raise PreflightError(f"{ctx.framework} on {ctx.platform}: {layout}", setting="cp_comm_type")
    if resolution.planned_vocab is not None:
        required = required_for(ctx, resolution.planned_vocab)
        found = differences(required, record, ctx.framework)
        if found:
            key, want, got = found[0]
            more = f" (and {len(found) - 1} more: {', '.join(k for k, _, _ in found[1:])})" if len(found) > 1 else ""
            raise PreflightError(f"{ctx.framework} on {ctx.platform} would run {key}={got!r}, but {required_by(ctx)} "
                                 f"{key}={want!r}{more}", setting=key, expected=want, effective=got)
    try:
        digest, how = samples_digest(ctx.cfg, ctx.data, ctx.framework, resolution.samples)
    except (SamplesDiffer, SamplesUnavailable) as exc:  # a framework failure stops the job too (issue 40)
        raise PreflightError(str(exc), setting=DIGEST_KEY) from None
    record = {**record, DIGEST_KEY: digest}
    resolved_by += f"; {DIGEST_KEY}: {how}"
    if notes:
        resolved_by += "; stand-ins on this host: " + "; ".join(notes)
    return EffectiveSettings(settings=scalar_record(record), env=dict(plan.env), resolved_by=resolved_by)


def before_launch(ctx: RunContext, plan: LaunchPlan) -> tuple[EffectiveSettings, FrameworkVersions]:
    """What train/launch/launcher.py runs before every real job: the preflight and the framework versions.

    Raises :class:`PreflightError` with one line; a framework that cannot be run here
    (:class:`FrameworkUnavailable`) is folded into it, because a job whose framework is
    missing would only crash later.
    """
    try:
        effective = preflight(ctx, plan)
    except FrameworkUnavailable as exc:
        raise PreflightError(str(exc)) from None
    megatron_tree, primus_tree = load_plugin(ctx.framework).framework_trees(ctx)
    return effective, framework_versions(ctx.framework, megatron_tree=megatron_tree, primus_tree=primus_tree)


# ---------------------------------------------------------------------------
# CLI


def context_for(cfg: Config, platform: str, framework: str, model: str) -> RunContext:
    """The job's planning context with PROFILE applied (a tuned job is checked against its recipe)."""
    return job_context(cfg, platform, framework, model, dry_run=True)


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.launch.preflight",
        description="Resolve one vendor job's effective settings with the framework's own code (Megatron-LM, "
        "Primus, NeMo) and check them against config.env and the fairness table. Exits 1 naming the setting and "
        "both values when they differ or the framework rejects the configuration; 2 when the framework cannot be "
        "run here. Framework locations: the image's, or TPRIMAT_MEGATRON_LM, TPRIMAT_PRIMUS, "
        "TPRIMAT_MEGATRON_PYTHON, TPRIMAT_NEMO_PYTHON.",
    )
    parser.add_argument("--platform", required=True, choices=platform_names())
    parser.add_argument("--framework", required=True, choices=framework_names())
    parser.add_argument("--model", required=True, choices=model_names())
    parser.add_argument("--json", action="store_true", help="print the effective_settings record as JSON")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
        ctx = context_for(cfg, args.platform, args.framework, args.model)
        print(f"tprimat preflight: resolving {args.platform}/{args.framework}/{args.model} ...", file=sys.stderr)
        record = preflight(ctx, load_plugin(args.framework).plan(ctx))
    except ProfileError as exc:  # a profile is part of the configuration: said as a config error
        raise ConfigError(str(exc)) from exc
    except FrameworkUnavailable as exc:
        print(f"tprimat preflight: {exc}", file=sys.stderr)
        return 2
    except (PreflightError, ValueError, FileNotFoundError) as exc:
        print(f"tprimat preflight: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(record.model_dump_json(indent=2))
    else:
        print(f"tprimat preflight: ok, {len(record.settings)} settings as required ({record.resolved_by})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
