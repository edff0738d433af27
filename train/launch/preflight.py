"""Preflight: the settings a vendor job will really run, resolved by the framework's own code, checked in seconds.

Before a GPU hour is spent, each framework's plugin (``resolve(ctx, plan)``) asks its own code what it makes of
the generated configuration (:mod:`train.megatron.probe`, :mod:`train.prim.probe`, :mod:`train.nemo.probe`;
``tran`` and ``deep`` are tprimat's own). The flat record is compared with
:func:`train.settings.expected.required_settings`; a difference or a rejection raises :class:`PreflightError`
naming the setting and both values. ``python -m train.launch.preflight --platform P --framework F --model M
[--json]`` runs it for one job; the launcher calls ``before_launch(ctx, plugin, plan)`` before a real run, with the
plugin it planned the job with.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from train.launch.context import job_context, load_plugin
from train.launch.contract import LaunchPlan, Plugin, PreflightError, RunContext
from train.profiles import ProfileError
from train.rules.cp_comm import cp_layout_problem
from train.rules.versions import framework_versions
from train.settings.expected import differences, required_settings
from train.settings.runner import FrameworkRejected, FrameworkUnavailable
from train.settings.samples import SamplesDiffer, SamplesUnavailable, samples_digest
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import Config
from utils.config.rules import ConfigError
from utils.dataset.sample_digest import DIGEST_KEY
from utils.schema.hardware import FrameworkVersions
from utils.schema.run import EffectiveSettings
from utils.spec.registry import FRAMEWORKS, framework_names, model_names, platform_names

# ---------------------------------------------------------------------------
# the check


def preflight(ctx: RunContext, plan: LaunchPlan) -> EffectiveSettings:
    """The check run on its own (``python -m train.launch.preflight``, the tests): :func:`before_launch` with the
    framework's plugin loaded here, its record.

    Raises :class:`PreflightError` (a difference or a rejection: setting and both values
    named) or :class:`train.settings.runner.FrameworkUnavailable` (framework Python or
    tree missing or at the wrong version: names MEGATRON_REF / the image variable).
    """
    if ctx.framework not in FRAMEWORKS:
        raise PreflightError(f"framework {ctx.framework!r}: no resolver (known: {', '.join(FRAMEWORKS)})")
    return before_launch(ctx, load_plugin(ctx.framework), plan)[0]


def before_launch(ctx: RunContext, plugin: Plugin, plan: LaunchPlan) -> tuple[EffectiveSettings, FrameworkVersions]:
    """What train/launch/launcher.py runs before every real job, with the plugin that planned it: the settings the
    framework's own code resolves, checked, the record to store, and the versions of the trees they came from.

    Checked in one order, the first finding raised as a :class:`PreflightError` in one line: the framework's
    rejection; a CP layout Transformer Engine cannot run (issue 40); every setting against what the job must run
    (:func:`train.settings.expected.required_settings`), the first difference named with both values and who
    requires it; the samples the framework feeds against tran's (the digest, issue 40). The record keeps only JSON
    scalars (the result model's ``EffectiveSettings.settings``), sorted. A framework that cannot be run here raises
    :class:`FrameworkUnavailable` (the launcher refuses the job with it, the CLI exits 2).
    """
    try:
        resolution = plugin.resolve(ctx, plan)
    except FrameworkRejected as exc:
        raise PreflightError(str(exc), setting=exc.setting) from None
    megatron_tree, primus_tree = plugin.framework_trees(ctx)
    record, built = resolution.record, resolution.samples.built if resolution.samples is not None else None
    try:
        layout = cp_layout_problem(record)
        if layout:
            raise PreflightError(f"{ctx.framework} on {ctx.platform}: {layout}", setting="cp_comm_type")
        if resolution.planned_vocab is not None:
            required = required_settings(ctx.cfg, ctx.platform, ctx.framework, ctx.shape, resolution.planned_vocab,
                                         ctx.profile.expected())
            found = differences(required, record, ctx.framework)
            if found:
                key, want, got = found[0]
                more = f" (and {len(found) - 1} more: {', '.join(k for k, _, _ in found[1:])})" if found[1:] else ""
                who = (f"the tuned recipe {ctx.profile.recipe.id} (over config.env and the fairness table) requires"
                       if ctx.profile.tuned and ctx.profile.recipe is not None
                       else "config.env and the fairness table require")
                raise PreflightError(f"{ctx.framework} on {ctx.platform} would run {key}={got!r}, but {who} "
                                     f"{key}={want!r}{more}", setting=key, expected=want, effective=got)
        try:
            digest, how = samples_digest(ctx.cfg, ctx.data, ctx.framework, resolution.samples)
        except (SamplesDiffer, SamplesUnavailable) as exc:  # a framework failure stops the job too (issue 40)
            raise PreflightError(str(exc), setting=DIGEST_KEY) from None
    finally:
        if built is not None:  # the samples the settings probe built
            shutil.rmtree(built.parent, ignore_errors=True)
    stand_ins = "; stand-ins on this host: " + "; ".join(resolution.notes) if resolution.notes else ""
    scalars = {key: value for key, value in sorted({**record, DIGEST_KEY: digest}.items())
               if value is None or isinstance(value, (str, int, float, bool))}
    effective = EffectiveSettings(settings=scalars, env=dict(plan.env),
                                  resolved_by=f"{resolution.resolved_by}; {DIGEST_KEY}: {how}{stand_ins}")
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
        plugin = load_plugin(args.framework)
        record, _ = before_launch(ctx, plugin, plugin.plan(ctx))
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
