"""The ``nemo`` launcher plugin: NeMo 2 pretraining recipes on NVIDIA, measured by tprimat's own callback.

The overrides (:mod:`train.nemo.recipe`) are NeMo-free, so ``--dry-run`` needs no NeMo.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.launch.job_result import collect_own_result
from train.launch.torchrun import torchrun_argv
from train.logs.quality import HELD_OUT
from train.megatron.args import memory_recipe
from train.nemo.recipe import ATTENTION_BACKEND, NEMO_IMAGE, NemoOverrides, build_overrides
from train.nemo.record import nemo_record
from train.profiles import IDENTICAL, AppliedProfile
from train.settings.platform_env import attention_env, launcher_env
from train.settings.runner import python_for, run_probe
from train.settings.samples import SampleSource
from utils.config.model import REPO_ROOT, Config
from utils.dataset.framework_tokenizer import framework_tokenizer
from utils.dataset.paths import JobData, load_tokenizer, missing_files, vocab_size
from utils.measure.memory import Recipe
from utils.measure.quality import held_out_notes
from utils.schema.model import Result
from utils.spec.models import ModelShape, get_shape, workload_shape

PLATFORM = "nvd"
FRAMEWORK = "nemo"
ENTRY_MODULE = "train.nemo.entry"
# The preflight's NeMo Python (train/settings/runner.py), where it is not the image's.
NEMO_PYTHON = "TPRIMAT_NEMO_PYTHON"


def nemo_env(profile: AppliedProfile = IDENTICAL) -> dict[str, str]:
    """The NVIDIA launcher table (with a tuned recipe's variables) and the NVTE_* switches of the attention
    backend the overrides set (``model.config.attention_backend``), which Megatron checks at model build."""
    backend = profile.setting("attention_backend", ATTENTION_BACKEND)
    return {**launcher_env(PLATFORM, profile.env), **attention_env(backend)}


def resolve_shape(cfg: Config, model: str, tokenizer_dir: Path) -> ModelShape:
    """The model shape with the real vocabulary: the tokenizer's for tiny models, checked for full ones (``ValueError``:
    more ids than the model's embedding has rows)."""
    tokens = vocab_size(load_tokenizer(tokenizer_dir))
    if cfg.model_size == "tiny":
        return get_shape(model, "tiny", vocab_size=tokens, layers=cfg.model_layers)
    shape = workload_shape(cfg, model)
    if tokens > shape.vocab_size:
        raise ValueError(f"tokenizer in {tokenizer_dir} has {tokens} ids but {shape.display_name} has "
                         f"{shape.vocab_size} embedding rows: wrong tokenizer for this model")
    return shape


def nemo_dirs(cfg: Config, stem: str) -> tuple[Path, Path]:
    """(NeMo's log directory for this run, Megatron's dataset index cache)."""
    base = cfg.output_dir / "nemo"
    return base / stem, base / "index_cache"


def overrides_for(cfg: Config, model: str, data: JobData, stem: str, profile: AppliedProfile = IDENTICAL,
                  write: bool = True) -> NemoOverrides:
    """The recipe overrides of ``model`` on its ``data``; the data module's tokenizer names no pad that is a real
    token (``utils/dataset/framework_tokenizer.py``; ``write=False``, a dry run, names that copy without writing it)."""
    log_dir, index_dir = nemo_dirs(cfg, stem)
    given, pad_note = framework_tokenizer(data.tokenizer_dir, cfg.output_dir, write=write)
    overrides = build_overrides(cfg, model, resolve_shape(cfg, model, data.tokenizer_dir), data_prefix=data.prefix,
                                tokenizer_dir=given, log_dir=log_dir, index_cache_dir=index_dir, profile=profile,
                                valid_prefix=data.valid)
    if pad_note:
        overrides.notes.append(pad_note)
    return overrides


def overrides_path(ctx: RunContext) -> Path:
    return ctx.log_path.with_name(f"{ctx.result_path.stem}.nemo_overrides.json")


def plan(ctx: RunContext) -> LaunchPlan:
    """torchrun + ``-m train.nemo.entry`` with the NVIDIA environment and the overrides file."""
    if ctx.platform != PLATFORM:
        raise ValueError(f"the nemo launcher runs on {PLATFORM} only (FRAMEWORK=nemo on {ctx.platform} maps to "
                         "that platform's own stack)")
    overrides = overrides_for(ctx.cfg, ctx.model, ctx.data, ctx.result_path.stem, ctx.profile, write=not ctx.dry_run)
    file = overrides_path(ctx)
    argv = [*torchrun_argv(ctx.cfg), "-m", ENTRY_MODULE, "--model", ctx.model,
            "--result", str(ctx.result_path), "--overrides", str(file), "--log", str(ctx.log_path)]
    if ctx.run_index is not None:
        argv += ["--run-index", str(ctx.run_index)]
    notes = [*overrides.notes, f"runs inside {NEMO_IMAGE}; the result is written by tprimat's Lightning callback",
             *held_out_notes(ctx.cfg, HELD_OUT["nemo"])]
    missing = missing_files(ctx.data.prefix)  # the tokenizer is checked when the recipe is built
    if missing:
        notes.append(f"dataset files missing now: {', '.join(map(str, missing))} (prepare the data first)")
    return LaunchPlan(argv=argv, env=nemo_env(ctx.profile), cwd=REPO_ROOT,
                      files={file: overrides.to_json()}, notes=notes)


def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result | None:
    """The callback's result; without one, a failure result naming the cause found in the log."""
    return collect_own_result(ctx, returncode)


# The contract's preflight: None, the standard one (train/launch/preflight.py checks what resolve() below answers).
preflight = None


def resolve(ctx: RunContext, plan: LaunchPlan) -> Resolution:
    """The recipe with the plan's overrides, built and connected as ``llm.pretrain`` does, read back by NeMo (the
    pad-free tokenizer copy a dry-run plan names is written first: NeMo's recipe loads it)."""
    framework_tokenizer(ctx.data.tokenizer_dir, ctx.cfg.output_dir)
    _, text = plan.generated(".nemo_overrides.json")
    with tempfile.TemporaryDirectory(prefix="tprimat-preflight-") as scratch:
        file = Path(scratch) / "overrides.json"
        file.write_text(text, encoding="utf-8")
        request = {"overrides": str(file), "world_size": ctx.cfg.world_size, "env": plan.env}
        answer = run_probe("train.nemo.probe", request, python_for(NEMO_PYTHON), "NeMo")
    raw, notes = answer.raw, list(answer.payload.get("stand_ins") or [])
    if not answer.payload.get("have_transformer_engine", True):
        # NeMo forces a materialised mask when Transformer Engine is missing (a CPU host); the image has TE,
        # so the configured value is the one a real run uses.
        raw["data"]["create_attention_mask"] = answer.payload["configured"]["create_attention_mask"]
        notes.append("create_attention_mask read from the recipe: without Transformer Engine NeMo would force it on")
    by = (f"NeMo {answer.payload['framework'].get('nemo')}: recipe + overrides built with fiddle, optim.connect "
          f"+ strategy.connect (precision plugin applied), read back, in {answer.python}")
    vocab = json.loads(text)["fields"]["model.config.vocab_size"]
    return Resolution(nemo_record(raw, answer.payload.get("lr_by_step")), by, notes, planned_vocab=vocab,
                      samples=SampleSource(answer.python))


def memory(ctx: RunContext, plan: LaunchPlan) -> Recipe:
    """Megatron's bf16 weights and gradient buffer, the distributed optimizer's sharded fp32 states (TE kernels:
    NeMo's recipes build Transformer Engine layers whatever MEGATRON_IMPL says)."""
    return memory_recipe(ctx.cfg, "nemo", transformer_impl="transformer_engine")


def framework_trees(ctx: RunContext) -> tuple[Path | None, Path | None]:
    """NeMo runs neither a Megatron-LM nor a Primus tree of tprimat's choosing (its versions name its code)."""
    return None, None
