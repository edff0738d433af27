"""``mega``: Megatron-LM's own ``pretrain_gpt.py`` on AMD and NVIDIA, read back from its log.

Plugin (:class:`train.launch.contract.Plugin`): :func:`plan` builds the ``torchrun ... pretrain_gpt.py`` command
(flags from :mod:`train.megatron.args`, shared with Primus); :func:`collect` reads the log
(:mod:`train.megatron.collect`); :func:`resolve` asks Megatron-LM's own argument validation
(:mod:`train.megatron.probe`). Megatron-LM comes from ``MEGATRON_PATH``, else the image's tree; when it or the data
is missing a real run fails with the reason, while ``--dry-run`` still prints the command with a note.
"""

from __future__ import annotations

import os
from pathlib import Path

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.launch.torchrun import torchrun_argv
from train.logs.quality import MEGATRON_BLOCKS
from train.megatron.args import (
    VocabPadding,
    attention_backend,
    evaluation_data,
    megatron_settings,
    memory_recipe,
    render_cli,
    vocab_padding,
)
from train.megatron.collect import collect_from_log
from train.megatron.inputs import index_cache_dir
from train.megatron.stack import ask_probe, job_inputs
from train.megatron.trees import MEGATRON_TREE, find_megatron, preflight_tree
from train.profiles import IDENTICAL, AppliedProfile
from train.rules.versions import MegatronRefError, check_megatron_tree
from train.settings.platform_env import attention_env, launcher_env
from train.settings.runner import FrameworkUnavailable, ProbeAnswer
from utils.config.model import Config
from utils.measure.memory import Recipe
from utils.measure.quality import held_out_notes
from utils.schema.model import Result
from utils.spec.models import ModelShape

# The worker script the launcher's stop at a target signals (train/launch/target_watch.py).
STOP_SCRIPT = "pretrain_gpt.py"


def megatron_args(
    cfg: Config,
    shape: ModelShape,
    platform: str,
    data_prefix: Path,
    tokenizer_dir: Path,
    padding: VocabPadding | None = None,
    profile: AppliedProfile = IDENTICAL,
    valid: Path | None = None,
) -> list[str]:
    """The exact ``pretrain_gpt.py`` argument list for this workload (pure: no process is started).

    ``valid``: the validation prefix (the job's ``JobData.valid``), read when evaluation is on.
    """
    padding = padding or vocab_padding(cfg, shape, tokenizer_dir)
    settings = megatron_settings(cfg, shape, platform, tokenizer_dir, padding, profile)
    settings.update(evaluation_data(cfg, data_prefix, valid), data_cache_path=str(index_cache_dir(cfg)))
    return render_cli(settings)


def plan(ctx: RunContext) -> LaunchPlan:
    """``torchrun <rendezvous> <MEGATRON_PATH>/pretrain_gpt.py <flags>`` with the platform's environment."""
    cfg = ctx.cfg
    root, root_problem = find_megatron(cfg, ctx.platform)
    job = job_inputs(ctx, root_problem)
    argv = [*torchrun_argv(cfg), str(root / "pretrain_gpt.py"),
            *megatron_args(cfg, job.shape, ctx.platform, job.prefix, job.tokenizer, job.padding, ctx.profile,
                           ctx.data.valid)]
    backend = attention_backend(ctx.platform, ctx.profile, cfg.megatron_impl)
    env = {**launcher_env(ctx.platform, ctx.profile.env), **attention_env(backend)}
    notes = [*job.notes, *evaluation_notes(cfg)]
    return LaunchPlan(argv=argv, env=env, cwd=root if root_problem is None else None, notes=notes,
                      stop_script=STOP_SCRIPT if cfg.evaluates else None)


def evaluation_notes(cfg: Config) -> list[str]:
    """The dry run's words for held-out evaluation under Megatron (nothing when it is off)."""
    if not cfg.evaluates:
        return []
    target = (f"at the first evaluation at or below TARGET_LOSS={cfg.target_loss:g} (or a NaN one) the launcher "
              f"sends SIGTERM to one {STOP_SCRIPT} worker and --exit-signal-handler ends the run after that step"
              if cfg.target_loss is not None and cfg.stop_at_target else
              "a NaN evaluation stops the run (SIGTERM to one worker, --exit-signal-handler); no target stop")
    return [f"evaluation: {cfg.eval_iters} global batches ({cfg.eval_samples} samples) after every "
            f"{cfg.eval_interval_steps} steps; {target}", *held_out_notes(cfg, MEGATRON_BLOCKS)]


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result:
    """The result read from the run's log (failures included, with the reason)."""
    return collect_from_log(ctx, plan, returncode)


# The contract's preflight: None, the standard one (train/launch/preflight.py checks what resolve() below answers).
preflight = None


def resolve(ctx: RunContext, plan: LaunchPlan) -> Resolution:
    """Megatron-LM's ``parse_args`` + ``validate_args`` on the plan's exact argv, in the ``MEGATRON_REF`` tree."""
    cfg = ctx.cfg
    default, _ = find_megatron(cfg, ctx.platform)
    tree = preflight_tree(MEGATRON_TREE, default, "pretrain_gpt.py", "Megatron-LM",
                          f"mega runs MEGATRON_REF={cfg.megatron_ref}, installed in the images by ./shell/build.sh "
                          f"(or set MEGATRON_PATH / {MEGATRON_TREE})")
    try:
        commit = check_megatron_tree(tree, cfg.megatron_ref)
    except MegatronRefError as exc:
        raise FrameworkUnavailable(str(exc)) from None

    def resolved_by(answer: ProbeAnswer) -> str:
        version = answer.payload["framework"].get("megatron_core")
        return (f"Megatron-LM {commit[:12]} (megatron-core {version}) at {tree}: parse_args + validate_args "
                f"+ language-module attention check, in {answer.python}")

    request = {"tree": str(tree), "argv": plan.args_after("pretrain_gpt.py")}
    return ask_probe(ctx, plan, "train.megatron.probe", "Megatron-LM", request, resolved_by, dataset_code=tree)


def memory(ctx: RunContext, plan: LaunchPlan) -> Recipe:
    """Megatron's bf16 weights and gradient buffer, the distributed optimizer's sharded fp32 states (TE kernels)."""
    return memory_recipe(ctx.cfg, "mega")


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """The Megatron-LM tree the preflight asked (``TPRIMAT_MEGATRON_LM``, else the one the plan runs)."""
    return Path(os.environ.get(MEGATRON_TREE) or find_megatron(ctx.cfg, ctx.platform)[0]), None
