"""Preflight: the settings a vendor job will really run, resolved by the framework's own code, checked in seconds.

Why: three of the four NVIDIA vendor jobs once would have crashed at model build or run
other settings than the fairness table (issue 10). Before a GPU hour is spent, each
framework is asked what it makes of tprimat's generated configuration:

* ``mega``: Megatron-LM's ``parse_args`` + ``validate_args`` on the exact argv, with the
  world size set, plus the language module's attention check under the launcher's
  environment (:mod:`train.effective.probe_megatron`), in the ``MEGATRON_REF`` tree;
* ``prim``: Primus's experiment loading and overrides, its trainer's argument updates,
  Megatron's validation and Primus's ROCm checks (:mod:`train.effective.probe_primus`);
* ``nemo``: the recipe with the overrides applied, built and connected to the strategy
  and precision plugin as ``llm.pretrain`` does (:mod:`train.effective.probe_nemo`);
* ``tran``: tprimat is the framework; its record says so.

The flat record is compared with :func:`train.effective.expected.expected_settings`
(config.env + the fairness table). A difference, or a rejection by the framework, raises
:class:`PreflightError` whose one-line message names the setting and both values.

``python -m train.preflight --platform P --framework F --model M [--json]`` runs it for
one job. ``preflight(ctx, plan)`` is the function the launcher calls before a real run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from train.effective.expected import differences, expected_settings
from train.effective.flatten import megatron_record, nemo_record
from train.effective.runner import FrameworkRejected, FrameworkUnavailable, python_for, run_probe
from train.framework_versions import MegatronRefError, check_megatron_tree, framework_versions
from train.launch import LaunchPlan, RunContext, job_context, load_plugin
from train.megatron_args import find_megatron, primus_root
from train.profiles import ProfileError
from utils.configure import Config, ConfigError, load_config
from utils.models import get_shape
from utils.registry import framework_names, model_names, platform_names
from utils.result_model import EffectiveSettings, FrameworkVersions

MEGATRON_PYTHON = "TPRIMAT_MEGATRON_PYTHON"
NEMO_PYTHON = "TPRIMAT_NEMO_PYTHON"
MEGATRON_TREE = "TPRIMAT_MEGATRON_LM"
PRIMUS_TREE = "TPRIMAT_PRIMUS"
# The target GPU's compute-capability major, which Megatron's validate_args asks the first GPU for when
# TP or CP > 1 (only used on a host without a GPU): H100 is 9 (sm_90), MI300X (gfx942) reports 9 under ROCm.
GPU_ARCH = {"nvd": 9, "amd": 9}
TRAN_RESOLVED_BY = ("tprimat itself: tran is the reference trainer (train/train_tran.py, train/tran_step.py), "
                    "so its settings are the configuration; no framework to ask")


class PreflightError(RuntimeError):
    """The job would not run the fairness table's settings, or the framework refuses it. One line."""

    def __init__(self, message: str, setting: str | None = None, expected: Any = None, effective: Any = None):
        super().__init__(message)
        self.setting, self.expected, self.effective = setting, expected, effective


# ---------------------------------------------------------------------------
# one resolver per framework: (flat record, resolved_by, notes)


def _plan_file(plan: LaunchPlan, suffix: str) -> tuple[Path, str]:
    for path, text in plan.files.items():
        if str(path).endswith(suffix):
            return path, text
    raise PreflightError(f"the launch plan has no generated *{suffix} file to check")


def _argv_after_script(argv: list[str], script: str) -> list[str]:
    for index, word in enumerate(argv):
        if word.endswith(script):
            return argv[index + 1:]
    raise PreflightError(f"the launch plan does not run {script}: {' '.join(argv[:6])} ...")


def _tree(variable: str, default: Path, marker: str, what: str, hint: str) -> Path:
    tree = Path(os.environ.get(variable) or default)
    if not (tree / marker).is_file():
        raise FrameworkUnavailable(f"{what} not found: no {marker} in {tree}; {hint}")
    return tree


def resolve_mega(ctx: RunContext, plan: LaunchPlan) -> tuple[dict[str, Any], str, list[str]]:
    from train.train_mega import model_inputs

    cfg = ctx.cfg
    default, _ = find_megatron(cfg, ctx.platform)
    tree = _tree(MEGATRON_TREE, default, "pretrain_gpt.py", "Megatron-LM",
                 f"mega runs MEGATRON_REF={cfg.megatron_ref}, installed in the images by ./shell/build.sh "
                 f"(or set MEGATRON_PATH / {MEGATRON_TREE})")
    try:
        commit = check_megatron_tree(tree, cfg.megatron_ref)
    except MegatronRefError as exc:
        raise FrameworkUnavailable(str(exc)) from None
    _, _, _, padding = model_inputs(ctx)
    request = {"tree": str(tree), "argv": _argv_after_script(plan.argv, "pretrain_gpt.py"),
               "world_size": cfg.world_size, "env": plan.env, "tokenizer_size": padding.tokenizer_size,
               "device_arch": GPU_ARCH[ctx.platform]}
    answer = run_probe("probe_megatron", request, python_for(MEGATRON_PYTHON), "Megatron-LM")
    record = megatron_record(answer.raw, answer.payload.get("padded_vocab_size"), answer.payload.get("lr_by_step"))
    version = answer.payload["framework"].get("megatron_core")
    by = (f"Megatron-LM {commit[:12]} (megatron-core {version}) at {tree}: parse_args + validate_args "
          f"+ language-module attention check, in {answer.python}")
    return record, by, list(answer.payload.get("stand_ins") or [])


def resolve_prim(ctx: RunContext, plan: LaunchPlan) -> tuple[dict[str, Any], str, list[str]]:
    from train.train_mega import model_inputs

    cfg = ctx.cfg
    root = _tree(PRIMUS_TREE, primus_root(cfg), "examples/run_pretrain.sh", "Primus",
                 f"prim runs inside the rocm/primus image (set PRIMUS_PATH or {PRIMUS_TREE})")
    backend = root / "third_party" / "Megatron-LM"  # Primus's own submodule (train.megatron_args.primus_megatron)
    if not (backend / "pretrain_gpt.py").is_file():
        raise FrameworkUnavailable(f"Primus's Megatron-LM not found: no pretrain_gpt.py in {backend} "
                                   "(a Primus checkout needs its third_party/Megatron-LM submodule)")
    _, text = _plan_file(plan, ".primus.yaml")
    _, _, _, padding = model_inputs(ctx)
    with tempfile.TemporaryDirectory(prefix="tprimat-preflight-") as scratch:
        document = yaml.safe_load(text)
        document["workspace"] = scratch  # Primus creates its experiment folders there, not in OUTPUT_DIR
        exp = Path(scratch) / "experiment.yaml"
        exp.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        request = {"primus": str(root), "backend": str(backend), "exp": str(exp), "data_path": str(cfg.data_dir),
                   "world_size": cfg.world_size, "env": plan.env, "tokenizer_size": padding.tokenizer_size,
                   "device_arch": GPU_ARCH[ctx.platform]}
        answer = run_probe("probe_primus", request, python_for(MEGATRON_PYTHON), "Primus")
    record = megatron_record(answer.raw, answer.payload.get("padded_vocab_size"), answer.payload.get("lr_by_step"))
    info = answer.payload["framework"]
    by = (f"Primus {info.get('primus') or '(version not reported)'} at {root} with its Megatron-LM {backend}: "
          "load_primus_config + update_primus_config + validate_args + validate_args_on_rocm "
          f"+ attention check, in {answer.python}")
    return record, by, list(answer.payload.get("stand_ins") or [])


def resolve_nemo(ctx: RunContext, plan: LaunchPlan) -> tuple[dict[str, Any], str, list[str]]:
    _, text = _plan_file(plan, ".nemo_overrides.json")
    with tempfile.TemporaryDirectory(prefix="tprimat-preflight-") as scratch:
        file = Path(scratch) / "overrides.json"
        file.write_text(text, encoding="utf-8")
        request = {"overrides": str(file), "world_size": ctx.cfg.world_size, "env": plan.env}
        answer = run_probe("probe_nemo", request, python_for(NEMO_PYTHON), "NeMo")
    raw, notes = answer.raw, list(answer.payload.get("stand_ins") or [])
    if not answer.payload.get("have_transformer_engine", True):
        # NeMo forces a materialised mask when Transformer Engine is missing (a CPU host); the image has TE,
        # so the configured value is the one a real run uses.
        raw["data"]["create_attention_mask"] = answer.payload["configured"]["create_attention_mask"]
        notes.append("create_attention_mask read from the recipe: without Transformer Engine NeMo would force it on")
    by = (f"NeMo {answer.payload['framework'].get('nemo')}: recipe + overrides built with fiddle, optim.connect "
          f"+ strategy.connect (precision plugin applied), read back, in {answer.python}")
    return nemo_record(raw, answer.payload.get("lr_by_step")), by, notes


def _reference_record(ctx: RunContext) -> dict[str, Any]:
    """The settings tran and deep share: their model, samples, optimizer and schedule are tprimat's own."""
    cfg = ctx.cfg
    keys = ("seed", "micro_batch_size", "global_batch_size", "seq_length", "train_iters", "lr", "min_lr",
            "lr_decay_style", "lr_warmup_iters", "lr_decay_iters", "weight_decay", "adam_beta1", "adam_beta2",
            "clip_grad", "init_method_std", "data_parallel_size", "precision", "num_layers", "hidden_size",
            "ffn_hidden_size", "num_attention_heads", "num_query_groups", "rotary_base", "norm_epsilon",
            "add_qkv_bias", "untie_embeddings_and_output_weights", "adam_eps", "hidden_dropout", "attention_dropout",
            "lr_step_1", "lr_step_2", "lr_step_last")
    shape = get_shape(ctx.model, cfg.model_size)
    table = expected_settings(cfg, "nvd", shape, shape.vocab_size)
    record = {key: table[key] for key in keys}
    record.update(attention_backend="sdpa", tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                  context_parallel_size=1)
    return record


def resolve_tran(ctx: RunContext, plan: LaunchPlan) -> tuple[dict[str, Any], str, list[str]]:
    record = _reference_record(ctx)
    # Weights stay fp32 under autocast (train/tran_step.py), so DDP reduces fp32 gradients, and its
    # bucketed all-reduce overlaps the last micro-batch's backward: unlike the fairness table.
    record.update(grad_reduce_in_fp32=True, overlap_grad_reduce=ctx.cfg.world_size > 1)
    return record, TRAN_RESOLVED_BY, []


def resolve_deep(ctx: RunContext, plan: LaunchPlan) -> tuple[dict[str, Any], str, list[str]]:
    """deep trains tran's model with tran's loop; DeepSpeed resolves its own config only inside
    ``deepspeed.initialize``, where train/train_deep.py compares it with the config and stops on a
    difference (train/launch.py merges the engine's values, its gradient reduction included, over
    this record in the result)."""
    record = _reference_record(ctx)
    record["zero_stage"] = ctx.cfg.zero_stage
    return record, ("tprimat's configuration for the DeepSpeed engine (train/train_deep.py): the engine's own "
                    "resolution is checked at deepspeed.initialize, before the first step"), []


RESOLVERS = {"mega": resolve_mega, "prim": resolve_prim, "nemo": resolve_nemo, "tran": resolve_tran,
             "deep": resolve_deep}


# ---------------------------------------------------------------------------
# the check


def expected_for(ctx: RunContext, plan: LaunchPlan) -> dict[str, Any]:
    """config.env + the fairness table for this job (under tuned, with the recipe's settings over the table's),
    with the vocabulary the launcher planned."""
    cfg = ctx.cfg
    shape = get_shape(ctx.model, cfg.model_size)
    if ctx.framework == "nemo":
        _, text = _plan_file(plan, ".nemo_overrides.json")
        vocab = json.loads(text)["fields"]["model.config.vocab_size"]
    else:
        from train.train_mega import model_inputs

        _, _, shape, padding = model_inputs(ctx)
        vocab = padding.padded
    return {**expected_settings(cfg, ctx.platform, shape, vocab), **ctx.profile.expected()}


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
    named) or :class:`train.effective.runner.FrameworkUnavailable` (framework Python or
    tree missing or at the wrong version: names MEGATRON_REF / the image variable).
    """
    if ctx.framework not in RESOLVERS:
        raise PreflightError(f"framework {ctx.framework!r}: no resolver (known: {', '.join(RESOLVERS)})")
    try:
        record, resolved_by, notes = RESOLVERS[ctx.framework](ctx, plan)
    except FrameworkRejected as exc:
        raise PreflightError(str(exc), setting=exc.setting) from None
    if ctx.framework not in ("tran", "deep"):
        found = differences(expected_for(ctx, plan), record, ctx.framework)
        if found:
            key, want, got = found[0]
            more = f" (and {len(found) - 1} more: {', '.join(k for k, _, _ in found[1:])})" if len(found) > 1 else ""
            raise PreflightError(f"{ctx.framework} on {ctx.platform} would run {key}={got!r}, but {required_by(ctx)} "
                                 f"{key}={want!r}{more}", setting=key, expected=want, effective=got)
    if notes:
        resolved_by += "; stand-ins on this host: " + "; ".join(notes)
    return EffectiveSettings(settings=scalar_record(record), env=dict(plan.env), resolved_by=resolved_by)


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """(Megatron-LM tree, Primus tree) the job runs, as the resolvers find them; None where it runs none."""
    cfg = ctx.cfg
    if ctx.framework == "mega":
        return Path(os.environ.get(MEGATRON_TREE) or find_megatron(cfg, ctx.platform)[0]), None
    if ctx.framework == "prim":
        root = Path(os.environ.get(PRIMUS_TREE) or primus_root(cfg))
        return root / "third_party" / "Megatron-LM", root
    return None, None


def before_launch(ctx: RunContext, plan: LaunchPlan) -> tuple[EffectiveSettings, FrameworkVersions]:
    """What train/launch.py runs before every real job: the preflight and the framework versions.

    Raises :class:`PreflightError` with one line; a framework that cannot be run here
    (:class:`FrameworkUnavailable`) is folded into it, because a job whose framework is
    missing would only crash later.
    """
    try:
        effective = preflight(ctx, plan)
    except FrameworkUnavailable as exc:
        raise PreflightError(str(exc)) from None
    megatron_tree, primus_tree = framework_trees(ctx)
    return effective, framework_versions(ctx.framework, megatron_tree=megatron_tree, primus_tree=primus_tree)


# ---------------------------------------------------------------------------
# CLI


def context_for(cfg: Config, platform: str, framework: str, model: str) -> RunContext:
    """The job's planning context with PROFILE applied (a tuned job is checked against its recipe)."""
    return job_context(cfg, platform, framework, model, dry_run=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m train.preflight",
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
    except (ConfigError, ProfileError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
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
