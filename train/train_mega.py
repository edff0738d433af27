"""``mega``: Megatron-LM's own ``pretrain_gpt.py`` on AMD and NVIDIA, read back from its log.

Plugin of :mod:`train.launch`: :func:`plan` builds the exact ``torchrun ...
pretrain_gpt.py`` command from the typed config and the model shape table (flags
from :mod:`train.megatron_args`, shared with Primus); :func:`collect` turns the
log into the typed result with :mod:`train.megatron_common` (shared with Primus).

Megatron-LM is taken from ``MEGATRON_PATH``, else from the image: ``/opt/megatron-lm``
(NeMo image, nvd) or ``$PRIMUS_PATH/third_party/Megatron-LM`` (Primus image, amd,
``PRIMUS_PATH`` defaulting to ``/workspace/Primus``). When it or the prepared data is
missing, a real run stops with that reason (the launcher records a failed result);
``--dry-run`` still prints the full command, with the reason as a note, so the
command can be reviewed on a machine without Megatron.
"""

from __future__ import annotations

from pathlib import Path

from train.launch import LaunchPlan, RunContext, torchrun_argv
from train.megatron_args import (
    VocabPadding,
    attention_backend,
    find_megatron,
    megatron_settings,
    missing_data,
    render_cli,
    vocab_padding,
)
from train.megatron_common import collect_from_log, index_cache_dir, model_inputs
from train.platform_env import attention_env, launcher_env
from train.profiles import IDENTICAL, AppliedProfile
from utils.configure import Config
from utils.models import ModelShape
from utils.result_model import Result

SPLIT_ALL_TRAIN = "100,0,0"


def megatron_args(
    cfg: Config,
    shape: ModelShape,
    platform: str,
    data_prefix: Path,
    tokenizer_dir: Path,
    padding: VocabPadding | None = None,
    profile: AppliedProfile = IDENTICAL,
) -> list[str]:
    """The exact ``pretrain_gpt.py`` argument list for this workload (pure: no process is started)."""
    padding = padding or vocab_padding(cfg, shape.key, shape, tokenizer_dir)
    settings = megatron_settings(cfg, shape, platform, tokenizer_dir, padding, profile)
    settings.update(
        data_path=[str(data_prefix)],
        split=SPLIT_ALL_TRAIN,
        data_cache_path=str(index_cache_dir(cfg)),
    )
    return render_cli(settings)



def plan(ctx: RunContext) -> LaunchPlan:
    """``torchrun <rendezvous> <MEGATRON_PATH>/pretrain_gpt.py <flags>`` with the platform's environment."""
    cfg = ctx.cfg
    prefix, tokenizer, shape, padding = model_inputs(ctx)
    root, root_problem = find_megatron(cfg, ctx.platform)
    notes = [padding.note()]
    problems = [p for p in (root_problem, missing_data(prefix, tokenizer)) if p is not None]
    if problems and not ctx.dry_run:
        raise FileNotFoundError("; ".join(problems))
    notes += [f"{problem} (a real run stops here)" for problem in problems]
    argv = [*torchrun_argv(cfg), str(root / "pretrain_gpt.py"),
            *megatron_args(cfg, shape, ctx.platform, prefix, tokenizer, padding, ctx.profile)]
    env = {**launcher_env(ctx.platform, ctx.profile.env), **attention_env(attention_backend(ctx.platform, ctx.profile))}
    return LaunchPlan(argv=argv, env=env, cwd=root if root_problem is None else None, notes=notes)


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result:
    """The result read from the run's log (failures included, with the reason)."""
    return collect_from_log(ctx, plan, returncode)
