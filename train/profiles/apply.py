"""PROFILE for one job: the configuration it runs (identical, tuned or mlperf), checked against the node, with sources.

The launcher, the preflight and the training process each call :func:`apply_profile` and get the same
:class:`~utils.config.model.Config` (a tuned recipe's layout and batch replace config.env's, so FLOPs and the
workload follow) and :class:`AppliedProfile`. ``tuned``: unstated settings at the identical values; no recipe is an
error unless ``PROFILE_FALLBACK=identical``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from train.profiles import amd, mlperf, nvd
from train.profiles.recipe import WORKLOAD_FIELDS, WORKLOAD_NAMES, Borrowed, Recipe, VendorTable
from train.settings.expected import ATTENTION_BACKEND, FIXED, FP8_FIXED, GRADIENT_ACCUMULATION_FUSION
from train.settings.platform_env import PLATFORM_ENV, attention_env
from utils.config.model import Config
from utils.config.rules import ConfigError, tensor_split_problem
from utils.schema.run import ProfileSetting, ProfileSettings
from utils.spec.models import workload_shape

TABLES: dict[str, VendorTable] = {"nvd": nvd.TABLE, "amd": amd.TABLE}

# What the identical profile runs for the knobs a recipe may set that the fairness table does not
# state (train/settings/expected.py has the rest): the framework's own default, or None for "not set".
IDENTICAL_DEFAULTS: dict[str, Any] = {
    "cross_entropy_fusion_impl": "native",  # Megatron-LM's --cross-entropy-fusion-impl default
    "ddp_bucket_size": None,  # Megatron's DistributedDataParallelConfig default (sized by itself)
    "manual_gc_interval": None,
    "grad_reduce_in_fp32": False,
    "enable_primus_turbo": False,  # train/prim/plugin.py: the stock Megatron path
    "use_turbo_attention": False,
    "use_turbo_grouped_mlp": False,
}
DERIVED = "derived: DP = world size / (TP x PP x CP), GA = GBS / (MBS x DP)"


class ProfileError(ValueError):
    """PROFILE cannot be applied to this job; one line naming the recipe and the key (or what exists)."""


@dataclass(frozen=True)
class Row:
    """One setting as ``--dry-run`` shows it: its identical value, the recipe's, and the source."""

    key: str
    identical: Any
    tuned: Any
    source: str
    kind: str  # workload | setting | env
    note: str = ""

    @property
    def differs(self) -> bool:
        return self.identical != self.tuned


@dataclass(frozen=True)
class AppliedProfile:
    """The profile one job runs: the recipe's framework settings and environment, and how it got them."""

    requested: str
    name: str
    recipe: Recipe | mlperf.MlperfRecipe | None = None
    borrowed: Borrowed | None = None
    fallback: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def tuned(self) -> bool:
        return self.name == "tuned"

    def setting(self, key: str, default: Any = None) -> Any:
        """The recipe's value for a framework setting, or ``default`` (the identical profile's)."""
        return self.settings.get(key, default)

    def expected(self) -> dict[str, Any]:
        """What the preflight must find resolved, over the fairness table's values."""
        return dict(self.settings)

    @property
    def mlperf(self) -> bool:
        return self.name == "mlperf"

    def render(self) -> list[str]:
        """Lines for ``--dry-run``: the profile, and under tuned or mlperf every setting with its source."""
        if self.recipe is None:
            if self.fallback:
                return [f"PROFILE=tuned requested; the identical profile runs (PROFILE_FALLBACK=identical): "
                        f"{self.fallback}"]
            return ["identical (config.env and the fairness table on every vendor stack)"]
        lines = [f"{self.name}: {self.recipe.title} [{self.recipe.id}]"]
        if self.borrowed:
            lines.append(f"borrowed from {self.borrowed.from_model}: {self.borrowed.reason}")
        for row in self.rows:
            same = "" if row.differs else "  (same as identical)"
            note = f"; {row.note}" if row.note else ""
            lines.append(f"{row.kind} {row.key} = {_text(row.tuned)}  [identical: {_text(row.identical)}]{same}"
                         f"  # {row.source}{note}")
        for item in getattr(self.recipe, "not_taken", ()):
            lines.append(f"not taken {item.key} = {_text(item.value)}  # {item.source.cite()}: {item.reason}")
        lines += [f"note: {note}" for note in self.notes]
        return lines

    def block(self) -> ProfileSettings | None:
        """What the result records: None for a plain identical run."""
        if self.requested == "identical":
            return None
        if self.recipe is None:
            return ProfileSettings(requested="tuned", fallback=self.fallback, notes=list(self.notes))
        differing = [ProfileSetting(key=row.key, identical=_scalar(row.identical), tuned=_scalar(row.tuned),
                                    source=row.source) for row in self.rows if row.differs and row.kind != "env"]
        if self.mlperf:
            return ProfileSettings(requested="mlperf", recipe=self.recipe.id, title=self.recipe.title,
                                   settings=differing, notes=list(self.notes))
        return ProfileSettings(
            requested="tuned", recipe=self.recipe.id, title=self.recipe.title,
            borrowed_from=self.borrowed.from_model if self.borrowed else None,
            settings=differing, env=dict(self.env), notes=list(self.notes))


IDENTICAL = AppliedProfile(requested="identical", name="identical")


def _text(value: Any) -> str:
    return "not set" if value is None else str(value)


def _scalar(value: Any) -> str | int | float | bool | None:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def available() -> str:
    """Every recipe as ``nvd mega|nemo: llama, qwen (llama's)``, for error messages."""
    parts = []
    for platform, table in TABLES.items():
        by_frameworks: dict[tuple[str, ...], list[str]] = {}
        for model, entry in table.recipes.items():
            recipe = entry.recipe if isinstance(entry, Borrowed) else entry
            label = f"{model} ({entry.from_model}'s)" if isinstance(entry, Borrowed) else model
            by_frameworks.setdefault(recipe.frameworks, []).append(label)
        parts += [f"{platform} {'|'.join(fw)}: {', '.join(models)}" for fw, models in by_frameworks.items()]
    return "; ".join(parts)


def find_recipe(platform: str, framework: str, model: str, precision: str) -> tuple[Recipe, Borrowed | None]:
    """The vendor recipe of one job, or :class:`ProfileError` naming what exists."""
    table = TABLES.get(platform)
    found = table.lookup(model) if table else None
    where = f"{framework} on {platform}"
    if found is None or framework not in found[0].frameworks:
        searched = f" (searched: {'; '.join(table.searched)})" if table else ""
        raise ProfileError(f"PROFILE=tuned: no vendor recipe for {model} with {where}{searched}; "
                           f"tuned recipes exist for {available()}")
    recipe, borrowed = found
    if precision not in recipe.precisions:
        raise ProfileError(f"PROFILE=tuned: recipe {recipe.id} states {', '.join(recipe.precisions)}, not "
                           f"{precision} (PRECISION/FP8); tuned recipes exist for {available()}")
    return recipe, borrowed


def _fit(recipe: Recipe, cfg: Config, model: str, values: dict[str, Any], settings: dict[str, Any]) -> dict[str, int]:
    """DP and GA of the recipe on this node, or :class:`ProfileError` naming the recipe and the key."""
    world = cfg.nnodes * cfg.gpus_per_node
    tp, pp, cp = (values["tensor_model_parallel_size"], values["pipeline_model_parallel_size"],
                  values["context_parallel_size"])
    sl, mbs, gbs = values["seq_length"], values["micro_batch_size"], values["global_batch_size"]
    shape = workload_shape(cfg, model)

    def fail(key: str, why: str) -> ProfileError:
        return ProfileError(f"recipe {recipe.id} does not fit this node: {key}: {why}")

    if world % (tp * pp * cp):
        raise fail("tensor_model_parallel_size", f"TP x PP x CP = {tp} x {pp} x {cp} = {tp * pp * cp} does not divide "
                   f"the world size NNODES x GPUS_PER_NODE = {cfg.nnodes} x {cfg.gpus_per_node} = {world}")
    dp = world // (tp * pp * cp)
    if gbs % (mbs * dp):
        raise fail("global_batch_size", f"{gbs} is not divisible by micro_batch_size x DP = {mbs} x {dp} = {mbs * dp}"
                   f" (DP = world size {world} / (TP x PP x CP))")
    if cp > 1 and sl % (2 * cp):
        raise fail("context_parallel_size", f"CP={cp} needs seq_length divisible by 2 x CP = {2 * cp}, got {sl}")
    split = tensor_split_problem(shape, tp)  # the config rule, again for the recipe's own TP
    if split:
        raise fail("tensor_model_parallel_size", split)
    if shape.num_layers % pp:
        raise fail("pipeline_model_parallel_size", f"PP={pp} does not divide {shape.num_layers} layers")
    if settings.get("sequence_parallel") and tp < 2:
        raise fail("sequence_parallel", "sequence parallelism needs tensor_model_parallel_size > 1, the recipe has "
                   f"TP={tp}")
    if sl > shape.max_position_embeddings:
        raise fail("seq_length", f"{sl} exceeds {shape.display_name}'s {shape.max_position_embeddings} positions")
    return {"dp": dp, "ga": gbs // (mbs * dp)}


def identical_values(cfg: Config, platform: str) -> dict[str, Any]:
    """The identical profile's value of every key a recipe may set (framework settings)."""
    return {**FIXED, **FP8_FIXED, "fp8": "hybrid" if cfg.fp8 else None,
            "attention_backend": ATTENTION_BACKEND.get(platform),
            "gradient_accumulation_fusion": GRADIENT_ACCUMULATION_FUSION.get(platform), **IDENTICAL_DEFAULTS}


def identical_env(platform: str) -> dict[str, str]:
    """The identical profile's launcher environment of ``platform`` (platform table + attention switches)."""
    backend = ATTENTION_BACKEND.get(platform)
    return {**PLATFORM_ENV.get(platform, {}), **(attention_env(backend) if backend else {})}


def apply_profile(cfg: Config, platform: str, framework: str, model: str) -> tuple[Config, AppliedProfile]:
    """The job's configuration and profile; :class:`ProfileError` when tuned cannot run and there is no fallback."""
    if cfg.profile == "mlperf":
        return apply_mlperf(cfg, framework, model)
    if cfg.profile != "tuned":
        return cfg, IDENTICAL
    precision = "fp8" if cfg.fp8 else cfg.precision
    try:
        recipe, borrowed = find_recipe(platform, framework, model, precision)
    except ProfileError as exc:
        if cfg.profile_fallback == "identical":
            return cfg.replace(profile="identical"), AppliedProfile(
                requested="tuned", name="identical", fallback=str(exc))
        raise ProfileError(f"{exc}; PROFILE_FALLBACK=identical runs such jobs with the identical profile") from None
    chosen = [s for s in recipe.settings if s.applies(framework, cfg.fp8)]
    values = {s.key: s.value for s in chosen}
    missing = [key for key in WORKLOAD_FIELDS if key not in values]
    if missing:
        raise ProfileError(f"recipe {recipe.id} states no {', '.join(missing)}")
    settings = {k: v for k, v in values.items() if k not in WORKLOAD_FIELDS}
    derived = _fit(recipe, cfg, model, values, settings)
    fields = {WORKLOAD_FIELDS[k]: v for k, v in values.items() if k in WORKLOAD_FIELDS and k != "global_batch_size"}
    try:
        tuned_cfg = cfg.replace(**fields, **derived)
    except ConfigError as exc:
        raise ProfileError(f"recipe {recipe.id} does not fit this config: {exc}") from None
    base, base_env = identical_values(cfg, platform), identical_env(platform)
    before = {"SL": cfg.sl, "MBS": cfg.mbs, "GBS": cfg.gbs, "TP": cfg.tp, "PP": cfg.pp, "CP": cfg.cp}
    rows = [Row(WORKLOAD_NAMES[s.key], before[WORKLOAD_NAMES[s.key]], s.value, s.source.cite(), "workload", s.note)
            for s in chosen if s.key in WORKLOAD_FIELDS]
    rows += [Row("DP", cfg.dp, tuned_cfg.dp, DERIVED, "workload"), Row("GA", cfg.ga, tuned_cfg.ga, DERIVED, "workload")]
    rows += [Row(s.key, base.get(s.key), s.value, s.source.cite(), "setting", s.note)
             for s in chosen if s.key not in WORKLOAD_FIELDS]
    env = {s.key: str(s.value) for s in recipe.env if s.applies(framework, cfg.fp8)}
    rows += [Row(s.key, base_env.get(s.key), str(s.value), s.source.cite(), "env", s.note)
             for s in recipe.env if s.applies(framework, cfg.fp8)]
    notes = list(recipe.notes)
    if borrowed:
        notes.insert(0, f"{model} runs {borrowed.from_model}'s recipe: {borrowed.reason}")
    world = cfg.nnodes * cfg.gpus_per_node
    if world != recipe.gpus:
        notes.append(f"the recipe was published for {recipe.gpus} GPUs; this node runs {world} with the same "
                     f"global batch size")
    skipped = {s.key: "/".join(s.frameworks) for s in recipe.settings if s.frameworks and framework not in s.frameworks}
    notes += [f"{key}: {owners} only, not applicable to {framework}" for key, owners in skipped.items()]
    applied = AppliedProfile(requested="tuned", name="tuned", recipe=recipe, borrowed=borrowed, settings=settings,
                             env=env, rows=tuple(rows), notes=tuple(notes))
    return tuned_cfg, applied


def apply_mlperf(cfg: Config, framework: str, model: str) -> tuple[Config, AppliedProfile]:
    """MLPerf's rules as config values (the same for every framework and platform), or :class:`ProfileError`."""
    recipe = mlperf.RECIPE
    if model != mlperf.MODEL:
        raise ProfileError(f"PROFILE=mlperf: MLPerf Training's rules are for Llama 3.1 8B (MODELS={mlperf.MODEL}); "
                           f"{model} has none")
    tiny = cfg.model_size == "tiny"
    chosen = mlperf.applied_values(tiny)
    changes = {v.key: v.value for v in chosen if v.key != "gbs"}
    if not tiny:
        gbs, per_step = mlperf.value_of("gbs"), cfg.mbs * cfg.dp
        if gbs % per_step:
            raise ProfileError(f"PROFILE=mlperf: GBS {gbs} (the RCP point) is not divisible by MBS x DP = {cfg.mbs} x "
                               f"{cfg.dp} = {per_step}; choose MBS, TP, PP and CP so that it is")
        changes["ga"] = gbs // per_step
    elif not cfg.eval_interval:  # a tiny run without a cadence of its own: CEIL(12288 / GBS) x GBS (rules line 450)
        changes["eval_interval"] = -(-mlperf.value_of("eval_interval") // cfg.gbs) * cfg.gbs
    try:
        new = cfg.replace(**changes)
    except ConfigError as exc:
        raise ProfileError(f"PROFILE=mlperf does not fit this config: {exc}") from None
    rows = [Row(v.key.upper(), getattr(cfg, v.key) if v.key != "gbs" else cfg.gbs, v.value, v.cite(),
                "workload" if v.workload else "config", v.note) for v in chosen]
    if not tiny:
        rows.append(Row("GA", cfg.ga, new.ga, DERIVED, "workload"))
    elif "eval_interval" in changes:
        rows.append(Row("EVAL_INTERVAL", cfg.eval_interval, new.eval_interval, "CEIL(12288 / GBS) x GBS: "
                        + mlperf.rules("line 450").cite(), "workload"))
    rows.append(Row("PRECISION", cfg.precision_label, new.precision_label, "config.env (declared)", "declared",
                    mlperf.PRECISION_NOTE))
    notes = list(recipe.notes)
    if framework == "nemo" and new.train_iters != new.decay_iters:
        notes.insert(0, mlperf.NEMO_HORIZON)
    if tiny:
        kept = ", ".join(f"{v.key.upper()}={getattr(new, v.key) if v.key != 'gbs' else new.gbs}"
                         for v in mlperf.VALUES if v.workload)
        notes.insert(0, f"MODEL_SIZE=tiny is not MLPerf's model: a pipeline check that keeps config.env's {kept}")
    elif cfg.model_layers is not None:
        notes.insert(0, f"MODEL_LAYERS={cfg.model_layers}: a proxy of Llama 3.1 8B, not MLPerf's model")
    samples = new.train_iters * new.gbs
    if not tiny and samples < mlperf.RCP_MIN_SAMPLES_GBS32:
        need = -(-mlperf.RCP_MIN_SAMPLES_GBS32 // new.gbs)
        notes.append(f"TRAIN_ITERS={new.train_iters} x GBS {new.gbs} = {samples} samples, below the "
                     f"{mlperf.RCP_MIN_SAMPLES_GBS32} MLPerf's reference runs needed at GBS 32 "
                     f"({mlperf.RCP_FILE}): the run ends before the target unless TRAIN_ITERS >= {need}")
    return new, AppliedProfile(requested="mlperf", name="mlperf", recipe=recipe, rows=tuple(rows), notes=tuple(notes))
