"""The one typed loader for ``config.env`` plus environment overrides.

Every framework launcher, data stage and evaluator reads the workload through
:func:`load_config`, so a result can record exactly what it ran with and two
results can be compared key by key. Derived values (global batch size, world
size) are computed here and checked, never taken on trust: a config that says
``GBS=128`` while ``MBS*DP*GA`` is 64 is an error, not a silent choice.

Run ``python -m utils.configure --help`` to print or query the effective config.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = REPO_ROOT / "config.env"
DEFAULT_SECRETS_FILE = REPO_ROOT / "secrets.env"
CONTAINER_DATA_DIR = "/data/tprimat"

PLATFORMS = ("amd", "nvd", "cpu")
FRAMEWORKS = ("mega", "prim", "nemo", "tran")
FRAMEWORK_CHOICES = (*FRAMEWORKS, "all")
MODEL_NAMES = ("llama", "qwen")
MODEL_SIZES = ("full", "tiny")
DATASETS = ("bc", "c4", "sample")
PRECISIONS = ("bf16", "fp16", "fp32")
LR_DECAYS = ("cosine", "linear", "constant")

# Keys of the workload that must be identical for two results to be comparable
# (the fairness table of DESIGN.md section 3). Paths, ranks and ports are not
# part of the workload.
WORKLOAD_KEYS = (
    "DATASET", "DATA_SAMPLES", "MODEL_SIZE", "SEED", "MBS", "GBS", "SL", "LR", "MIN_LR", "LR_DECAY",
    "WARMUP_STEPS", "TRAIN_ITERS", "WEIGHT_DECAY", "BETA1", "BETA2", "GRAD_CLIP", "INIT_STD",
    "TP", "PP", "CP", "DP", "GA", "PRECISION", "FP8", "WORLD_SIZE",
)


class ConfigError(ValueError):
    """A config value is missing, malformed or inconsistent. The message names the key."""


@dataclass(frozen=True)
class Config:
    """The effective workload. Field names are the ``config.env`` keys, lower-cased."""

    platform: str | None = None
    dataset: str = "bc"
    framework: str = "all"
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
    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 8
    ga: int = 8
    precision: str = "bf16"
    fp8: bool = False
    data_samples: int = 50000
    data_dir: Path = field(default_factory=lambda: REPO_ROOT / "data_cache")
    sample_mb: float = 4.0
    sample_vocab: int = 8192
    min_doc_chars: int = 16
    encode_workers: int = 0
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

    # ---- derived values -------------------------------------------------
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
        return min(max(2, self.train_iters // 10), max(self.train_iters - 1, 0))

    @property
    def dataset_name(self) -> str:
        """File-name-safe dataset label: ``local:/x/y.jsonl`` becomes ``local-y``."""
        if self.dataset.startswith("local:"):
            stem = Path(self.dataset[len("local:"):]).stem or "local"
            return "local-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", stem)
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
            out[f.name.upper()] = _format_value(getattr(self, f.name))
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
        _validate(new, explicit_gbs=None)
        return new


# ---------------------------------------------------------------------------
# parsing


def _format_value(value: Any) -> str:
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


def parse_env_file(path: Path) -> dict[str, str]:
    """Read ``KEY=value`` lines the way a POSIX shell would for simple assignments.

    Supports comments, blank lines, an optional ``export``, single/double quotes and
    trailing `` # comments``. Anything else is an error naming the line, because a
    line we cannot read is a workload we cannot vouch for.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        if not match:
            raise ConfigError(f"{path}:{number}: expected KEY=value, got {raw!r}")
        key, rest = match.groups()
        try:
            words = shlex.split(rest, comments=True, posix=True)
        except ValueError as exc:
            raise ConfigError(f"{path}:{number}: cannot parse value of {key}: {exc}") from exc
        values[key] = " ".join(words)
    return values


def _in_container(env: Mapping[str, str]) -> bool:
    """Inside a tprimat image (its Dockerfiles set TPRIMAT_IN_CONTAINER=1).

    Deliberately not ``/.dockerenv``: a developer machine or CI runner may itself be a
    container, and a native run there must keep its data in ./data_cache.
    """
    return env.get("TPRIMAT_IN_CONTAINER") == "1"


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(Config)}


def _convert(key: str, raw: str) -> Any:
    """Turn one raw string into the field's type, with an error naming key and value."""
    name = key.lower()
    kind = _FIELD_TYPES[name]
    text = raw.strip()
    if kind in ("int", "int | None"):
        if text == "" and kind.endswith("None"):
            return None
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key}={raw!r}: expected a whole number") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{key}={raw!r}: expected a number") from None
    if kind == "bool":
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{key}={raw!r}: expected true or false")
    if kind == "tuple[str, ...]":
        return tuple(text.replace(",", " ").split())
    if kind == "Path":
        return Path(text).expanduser() if text else None
    if kind == "Path | None":
        return Path(text).expanduser() if text else None
    if kind == "str | None":
        return text.lower() or None
    return text


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r}: allowed values are {', '.join(allowed)}")


def _validate(cfg: Config, explicit_gbs: int | None) -> None:
    if cfg.platform is not None:
        _choice("PLATFORM", cfg.platform, PLATFORMS)
    if not cfg.dataset.startswith("local:"):
        _choice("DATASET", cfg.dataset, (*DATASETS, "local:<path>"))
    elif cfg.dataset == "local:":
        raise ConfigError("DATASET='local:': a path must follow local:, e.g. local:/data/corpus.jsonl")
    _choice("FRAMEWORK", cfg.framework, FRAMEWORK_CHOICES)
    if not cfg.models:
        raise ConfigError(f"MODELS is empty: allowed values are {', '.join(MODEL_NAMES)}")
    for model in cfg.models:
        _choice("MODELS", model, MODEL_NAMES)
    _choice("MODEL_SIZE", cfg.model_size, MODEL_SIZES)
    _choice("PRECISION", cfg.precision, PRECISIONS)
    _choice("LR_DECAY", cfg.lr_decay, LR_DECAYS)
    positive = ("mbs", "sl", "train_iters", "tp", "pp", "cp", "dp", "ga", "data_samples", "nnodes",
                "gpus_per_node", "runs", "sample_vocab", "master_port")
    for name in positive:
        if getattr(cfg, name) < 1:
            raise ConfigError(f"{name.upper()}={getattr(cfg, name)}: must be at least 1")
    for name in ("warmup_steps", "node_rank", "encode_workers", "seed", "min_doc_chars"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{name.upper()}={getattr(cfg, name)}: must not be negative")
    for name in ("lr", "sample_mb"):
        if not getattr(cfg, name) > 0:
            raise ConfigError(f"{name.upper()}={getattr(cfg, name)}: must be greater than 0")
    for name in ("min_lr", "weight_decay", "grad_clip", "init_std"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{name.upper()}={getattr(cfg, name)}: must not be negative")
    if cfg.min_lr > cfg.lr:
        raise ConfigError(f"MIN_LR={cfg.min_lr}: must not exceed LR={cfg.lr}")
    for name in ("beta1", "beta2"):
        if not 0.0 <= getattr(cfg, name) < 1.0:
            raise ConfigError(f"{name.upper()}={getattr(cfg, name)}: must be in [0, 1)")
    if cfg.warmup_steps > cfg.train_iters:
        raise ConfigError(f"WARMUP_STEPS={cfg.warmup_steps}: must not exceed TRAIN_ITERS={cfg.train_iters}")
    if cfg.node_rank >= cfg.nnodes:
        raise ConfigError(f"NODE_RANK={cfg.node_rank}: must be below NNODES={cfg.nnodes}")
    if cfg.master_port > 65535:
        raise ConfigError(f"MASTER_PORT={cfg.master_port}: must be a TCP port (1-65535)")
    if cfg.measure_skip_steps is not None and not 0 <= cfg.measure_skip_steps < cfg.train_iters:
        raise ConfigError(
            f"MEASURE_SKIP_STEPS={cfg.measure_skip_steps}: must be in [0, TRAIN_ITERS={cfg.train_iters})"
        )
    if cfg.profiling and not 0 <= cfg.profile_step_start <= cfg.profile_step_end:
        raise ConfigError(
            f"PROFILE_STEP_START={cfg.profile_step_start}, PROFILE_STEP_END={cfg.profile_step_end}: "
            "need 0 <= start <= end"
        )
    if cfg.fp8 and cfg.precision != "bf16":
        raise ConfigError(f"FP8=true with PRECISION={cfg.precision}: FP8 training runs on top of bf16")
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


def load_config(
    config_file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load ``config.env`` (or ``TPRIMAT_CONFIG``) and apply environment overrides.

    ``environ`` defaults to ``os.environ``; tests pass a dict. An environment
    variable with a config key's name wins over the file, which is how
    ``MBS=2 ./shell/run_train.sh`` works.
    """
    env = dict(os.environ if environ is None else environ)
    path = Path(config_file or env.get("TPRIMAT_CONFIG") or DEFAULT_CONFIG_FILE)
    file_values = parse_env_file(path)
    known = {name.upper() for name in _FIELD_TYPES}
    unknown = sorted(set(file_values) - known - {"GBS"})
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
    merged = {**file_values, **{k: v for k, v in env.items() if k in known or k == "GBS"}}
    kwargs: dict[str, Any] = {}
    for key, raw in merged.items():
        if key == "GBS":
            continue
        value = _convert(key, raw)
        if value is None and _FIELD_TYPES[key.lower()] == "Path":
            continue  # empty path: keep the default chosen below
        kwargs[key.lower()] = value
    if kwargs.get("data_dir") is None:
        kwargs["data_dir"] = Path(CONTAINER_DATA_DIR) if _in_container(env) else REPO_ROOT / "data_cache"
    if kwargs.get("output_dir") is None:
        kwargs["output_dir"] = REPO_ROOT / "output"
    for name in ("data_dir", "output_dir"):
        if not kwargs[name].is_absolute():
            kwargs[name] = (REPO_ROOT / kwargs[name]).resolve()
    explicit_gbs = None
    if merged.get("GBS", "").strip():
        explicit_gbs = _convert("MBS", merged["GBS"]) if merged["GBS"].strip().isdigit() else None
        if explicit_gbs is None:
            raise ConfigError(f"GBS={merged['GBS']!r}: expected a whole number")
    cfg = Config(**kwargs)
    _validate(cfg, explicit_gbs)
    return cfg


def read_secret(name: str, environ: Mapping[str, str] | None = None, secrets_file: Path | None = None) -> str | None:
    """Return a secret (e.g. ``HF_TOKEN``) from the environment or ``secrets.env``.

    Never logged and never part of :class:`Config`, so it cannot leak into a result.
    """
    env = os.environ if environ is None else environ
    value = env.get(name, "").strip()
    if value:
        return value
    path = secrets_file or DEFAULT_SECRETS_FILE
    if path.is_file():
        try:
            value = parse_env_file(path).get(name, "").strip()
        except ConfigError:
            # The message of parse_env_file may quote the offending line, which could be the token.
            raise ConfigError(f"{path}: cannot be parsed; expected KEY=value lines") from None
        return value or None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.configure",
        description="Print the effective tprimat config (config.env + environment overrides), validated.",
    )
    parser.add_argument("--config", type=Path, help="config file (default: $TPRIMAT_CONFIG or ./config.env)")
    parser.add_argument("--get", metavar="KEY", help="print one value, e.g. DATA_DIR or GBS")
    parser.add_argument("--json", action="store_true", help="print every key as JSON")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    if args.get:
        values = cfg.to_dict()
        key = args.get.upper()
        if key not in values:
            print(f"config error: unknown key {args.get!r}; known: {', '.join(sorted(values))}", file=sys.stderr)
            return 2
        print(_format_value(cfg.as_env().get(key, values[key])))
    elif args.json:
        print(json.dumps(cfg.to_dict(), indent=2))
    else:
        for key, value in cfg.as_env().items():
            print(f"{key}={value}")
        print(f"# derived: GBS={cfg.gbs} WORLD_SIZE={cfg.world_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
