"""What a config is: the typed ``Config`` (its fields are the ``config.env`` keys), its derived values, and its checks.

Derived values (global batch size, world size) are computed and checked, never taken on trust: a config that says
``GBS=128`` while ``MBS*DP*GA`` is 64 is an error, not a silent choice. Each failure is one line naming key and value.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.config.rules import MODEL_NAMES, ConfigError, base_type, check_rules, tensor_split_problem
from utils.config.secret import holds_password
from utils.io.output_path import safe_label
from utils.spec.models import check_layers, get_shape
from utils.spec.registry import FRAMEWORK_ALL

REPO_ROOT = Path(__file__).resolve().parents[2]

# Keys of the workload that must be identical for two results to be comparable (the fairness table:
# train/settings/expected.py). Paths, ranks and ports are not part of the workload.
WORKLOAD_KEYS = (
    "DATASET", "DATA_SAMPLES", "MODEL_SIZE", "SEED", "MBS", "GBS", "SL", "LR", "MIN_LR", "LR_DECAY",
    "WARMUP_STEPS", "TRAIN_ITERS", "WEIGHT_DECAY", "BETA1", "BETA2", "GRAD_CLIP", "INIT_STD",
    "TP", "PP", "CP", "DP", "GA", "PRECISION", "FP8", "WORLD_SIZE",
)


def default_skip_steps(steps: int) -> int:
    """The default warm-up of a run of ``steps`` steps: max(2, 10%), always leaving one step measured (log analysis
    applies it to the steps a log holds: a fragment re-warms)."""
    return min(max(2, steps // 10), max(steps - 1, 0))


class EvaluationCadence:
    """The held-out evaluation schedule in steps, from EVAL_INTERVAL and EVAL_SAMPLES (in samples) and GBS.

    Said once for :class:`Config` and for a foreign log's settings (``train/logs/quality.py``). A subclass has
    ``eval_interval``, ``eval_samples`` and ``gbs``, unannotated here so that no dataclass or type-hint walk sees them.
    """

    @property
    def evaluates(self) -> bool:
        """Whether the run evaluates on the held-out set (EVAL_INTERVAL and EVAL_SAMPLES both set)."""
        return self.eval_interval > 0 and self.eval_samples > 0

    @property
    def eval_interval_steps(self) -> int:
        """Optimizer steps between evaluations (Megatron's ``--eval-interval``); 0 when evaluation is off."""
        return self.eval_interval // self.gbs

    @property
    def eval_iters(self) -> int:
        """Global batches per evaluation (Megatron's ``--eval-iters``); 0 when evaluation is off."""
        return self.eval_samples // self.gbs


@dataclass(frozen=True)
class Config(EvaluationCadence):
    """The effective workload. Field names are the ``config.env`` keys, lower-cased; config.env says what each means."""

    platform: str | None = None
    dataset: str = "bc"
    framework: tuple[str, ...] = (FRAMEWORK_ALL,)  # names in run order, or ("all",)
    models: tuple[str, ...] = MODEL_NAMES
    model_size: str = "full"
    seed: int = 42
    mbs: int = 1
    sl: int = 2048
    lr: float = 3.0e-4
    min_lr: float = 0.0
    lr_decay: str = "cosine"
    warmup_steps: int = 50
    train_iters: int = 500
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    init_std: float = 0.02
    lr_decay_iters: int | None = None
    adam_eps: float = 1e-8
    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 8
    ga: int = 8
    precision: str = "bf16"
    fp8: bool = False
    cpu_precision: str = "auto"
    zero_stage: int = 1
    model_layers: int | None = None
    tran_compile: bool | None = None
    profile: str = "identical"
    profile_fallback: str | None = None
    data_samples: int = 50000
    data_dir: Path = field(default_factory=lambda: REPO_ROOT / "data_cache")
    sample_mb: float = 4.0
    sample_vocab: int = 8192
    min_doc_chars: int = 16
    encode_workers: int = 0
    bos_policy: str = "megatron"
    output_dir: Path = field(default_factory=lambda: REPO_ROOT / "output")
    hf_home: Path | None = None
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "localhost"
    master_port: int = 29500
    gpus_per_node: int = 8
    runs: int = 1
    measure_skip_steps: int | None = None
    profiling: bool = False
    profile_step_start: int = 1
    profile_step_end: int = 5
    megatron_path: Path | None = None
    primus_path: Path | None = None
    megatron_ref: str = "847781764fe468c90caec16309deded245c1022c"
    megatron_impl: str = "transformer_engine"
    history_db: str | None = None
    eval_interval: int = 0
    eval_samples: int = 0
    target_loss: float | None = None
    stop_at_target: bool = True

    # ---- derived values -------------------------------------------------
    @property
    def precision_label(self) -> str:
        """The precision every framework's result records (``training_config.precision_effective``): one label per
        configuration, so that a fairness check can compare it; how a framework realises it is ``precision_detail``."""
        return f"{self.precision}+fp8" if self.fp8 else self.precision

    def tran_compile_on(self, platform: str) -> bool:
        """Whether tran compiles its decoder layers on ``platform``: TRAN_COMPILE, else on for GPUs, off on cpu."""
        return self.tran_compile if self.tran_compile is not None else platform != "cpu"

    @property
    def decay_iters(self) -> int:
        """The step at which the LR decay reaches MIN_LR: LR_DECAY_ITERS, else TRAIN_ITERS."""
        return self.lr_decay_iters if self.lr_decay_iters is not None else self.train_iters

    @property
    def gbs(self) -> int:
        """Global batch size in sequences per optimizer step."""
        return self.mbs * self.dp * self.ga

    @property
    def world_size(self) -> int:
        """Processes (GPUs) the parallel layout needs."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.gbs * self.sl

    @property
    def skip_steps(self) -> int:
        """Warm-up steps excluded from statistics: MEASURE_SKIP_STEPS or max(2, 10%)."""
        if self.measure_skip_steps is not None:
            return self.measure_skip_steps
        return default_skip_steps(self.train_iters)

    @property
    def dataset_name(self) -> str:
        """File-name-safe dataset label: ``local:/x/y.jsonl`` becomes ``local-y``."""
        if self.dataset.startswith("local:"):
            stem = Path(self.dataset[len("local:"):]).stem or "local"
            return "local-" + safe_label(stem, "local")
        return self.dataset

    def workload(self) -> dict[str, Any]:
        """The fairness-relevant keys, in config.env spelling, as recorded in every result."""
        values = {key.lower(): getattr(self, key.lower(), None) for key in WORKLOAD_KEYS}
        values["gbs"] = self.gbs
        values["world_size"] = self.world_size
        return {key: values[key.lower()] for key in WORKLOAD_KEYS}

    def as_env(self) -> dict[str, str]:
        """Every key as the string a shell or a child process would see."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            out[f.name.upper()] = format_value(getattr(self, f.name))
        out["GBS"] = str(self.gbs)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every key plus the derived ones."""
        out = {f.name.upper(): _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
        out["GBS"] = self.gbs
        out["WORLD_SIZE"] = self.world_size
        return out

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields changed, re-validated."""
        new = dataclasses.replace(self, **changes)
        check_config(new, explicit_gbs=None)
        return new


# Field name -> its real type (``int | None``, ``tuple[str, ...]``, ``Path``...), resolved once.
FIELD_TYPES: dict[str, Any] = typing.get_type_hints(Config)


def numeric_keys() -> tuple[str, ...]:
    """Config keys (upper case) whose type is a number; the hostile-input tests walk these."""
    return tuple(name.upper() for name, hint in FIELD_TYPES.items() if base_type(hint)[0] in (int, float))


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


# ---------------------------------------------------------------------------
# validation


def _check_consistency(cfg: Config, explicit_gbs: int | None) -> None:
    """Checks that involve several keys; each message names every key involved."""
    if FRAMEWORK_ALL in cfg.framework and len(cfg.framework) > 1:
        raise ConfigError(f"FRAMEWORK={format_value(cfg.framework)!r}: {FRAMEWORK_ALL} stands alone "
                          "(it means every framework of the platform)")
    if cfg.min_lr > cfg.lr:
        raise ConfigError(f"MIN_LR={cfg.min_lr}: must not exceed LR={cfg.lr}")
    if cfg.warmup_steps > cfg.decay_iters:
        horizon = "LR_DECAY_ITERS" if cfg.lr_decay_iters is not None else "TRAIN_ITERS"
        raise ConfigError(f"WARMUP_STEPS={cfg.warmup_steps}: must not exceed {horizon}={cfg.decay_iters}")
    if cfg.node_rank >= cfg.nnodes:
        raise ConfigError(f"NODE_RANK={cfg.node_rank}: must be below NNODES={cfg.nnodes}")
    if cfg.measure_skip_steps is not None and not cfg.measure_skip_steps < cfg.train_iters:
        raise ConfigError(
            f"MEASURE_SKIP_STEPS={cfg.measure_skip_steps}: must be in [0, TRAIN_ITERS={cfg.train_iters})"
        )
    if cfg.profiling and not cfg.profile_step_start <= cfg.profile_step_end:
        raise ConfigError(
            f"PROFILE_STEP_START={cfg.profile_step_start}, PROFILE_STEP_END={cfg.profile_step_end}: "
            "need 0 <= start <= end"
        )
    if cfg.fp8 and cfg.precision != "bf16":
        raise ConfigError(f"FP8=true with PRECISION={cfg.precision}: FP8 training runs on top of bf16")
    if cfg.model_layers is not None:
        for model in cfg.models:
            try:
                check_layers(model, cfg.model_size, cfg.model_layers)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    for model in cfg.models:  # a layout no stack can run is refused here, naming it (issue 40)
        problem = tensor_split_problem(get_shape(model, cfg.model_size), cfg.tp)
        if problem:
            raise ConfigError(f"{problem}; MODELS has {model} at MODEL_SIZE={cfg.model_size}")
    _check_evaluation(cfg)
    if explicit_gbs is not None and explicit_gbs != cfg.gbs:
        raise ConfigError(
            f"GBS={explicit_gbs} but MBS*DP*GA = {cfg.mbs}*{cfg.dp}*{cfg.ga} = {cfg.gbs}: "
            "set MBS, DP and GA (GBS is derived) or make them agree"
        )
    if cfg.world_size != cfg.nnodes * cfg.gpus_per_node:
        raise ConfigError(
            f"world size TP*PP*CP*DP = {cfg.tp}*{cfg.pp}*{cfg.cp}*{cfg.dp} = {cfg.world_size} but "
            f"NNODES*GPUS_PER_NODE = {cfg.nnodes}*{cfg.gpus_per_node} = {cfg.nnodes * cfg.gpus_per_node}: "
            "they must be equal"
        )


def _check_evaluation(cfg: Config) -> None:
    """The time-to-quality keys together (issue 34): both counts on or both off, whole global batches, a target
    only with evaluation on."""
    if (cfg.eval_interval > 0) != (cfg.eval_samples > 0):
        raise ConfigError(f"EVAL_INTERVAL={cfg.eval_interval}, EVAL_SAMPLES={cfg.eval_samples}: set both (evaluation "
                          "on) or neither (off)")
    for key, value in (("EVAL_INTERVAL", cfg.eval_interval), ("EVAL_SAMPLES", cfg.eval_samples)):
        if value % cfg.gbs:
            raise ConfigError(f"{key}={value}: must be a multiple of GBS={cfg.gbs} (every stack evaluates in whole "
                              "global batches)")
    if cfg.target_loss is not None and not cfg.evaluates:
        raise ConfigError(f"TARGET_LOSS={cfg.target_loss}: needs evaluation on (EVAL_INTERVAL and EVAL_SAMPLES)")


def check_config(cfg: Config, explicit_gbs: int | None = None) -> None:
    """Every check of a config: the rules of each key, then the cross-key ones (``explicit_gbs``: GBS as given)."""
    if cfg.history_db and holds_password(cfg.history_db):  # before any check that shows values
        raise ConfigError("HISTORY_DB holds a password (value not shown): config keys are printed; give it in "
                          "HISTORY_DB_PASSWORD (environment or secrets.env), PGPASSWORD or ~/.pgpass")
    check_rules({name: getattr(cfg, name) for name in FIELD_TYPES}, FIELD_TYPES)
    _check_consistency(cfg, explicit_gbs)
