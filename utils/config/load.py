"""The one loader of ``config.env`` plus environment overrides: text in, one checked ``Config`` out.

Every launcher, data stage and evaluator reads the workload through :func:`load_config`, so a result records exactly
what it ran with; the shell asks this module (``--get KEY``) instead of parsing files itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from utils.config.cli import exits_on_config_error
from utils.config.envfile import EnvFileError, read_env_file
from utils.config.model import FIELD_TYPES, REPO_ROOT, Config, check_config, format_value
from utils.config.rules import PLATFORMS, RULES, ConfigError, base_type, is_list, launch_problem, sequence_problem
from utils.config.secret import SECRET_KEYS, write_docker_env_file
from utils.io.sanitise import one_line
from utils.spec.models import workload_shape

DEFAULT_CONFIG_FILE = REPO_ROOT / "config.env"
CONTAINER_DATA_DIR = "/data/tprimat"
# Set by amd.Dockerfile and nvd.Dockerfile.
CONTAINER_MARKER = "TPRIMAT_IN_CONTAINER"


def in_tprimat_container(environ: Mapping[str, str] | None = None) -> bool:
    """Inside a tprimat image: its Dockerfiles set ``TPRIMAT_IN_CONTAINER=1`` (not ``/.dockerenv``: a developer
    machine or CI runner may itself be a container, and a native run there keeps its data in ./data_cache)."""
    env = os.environ if environ is None else environ
    return env.get(CONTAINER_MARKER) == "1"


# ---------------------------------------------------------------------------
# text -> typed value


def _plain_number(text: str) -> str:
    """``text`` when written as people write numbers; Python alone would also read ``1_000`` and
    non-ASCII digits (``٣``), which no shell or other framework reads as the same number."""
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return text


def _convert(key: str, raw: str) -> Any:
    """Turn one raw string into the field's type, with an error naming key and value."""
    kind, optional = base_type(FIELD_TYPES[key.lower()])
    text = raw.strip()
    rule = RULES.get(key.lower())
    if text == "" and (optional or kind is Path or (rule is not None and rule.empty_is_default)):
        return None  # empty: no value (a Path, or a key whose rule says so, falls back to its default)
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{key}={one_line(raw)!r}: expected true or false")
    if kind is int:
        try:
            return int(_plain_number(text))
        except ValueError:
            raise ConfigError(f"{key}={one_line(raw)!r}: expected a whole number") from None
    if kind is float:
        try:
            return float(_plain_number(text))
        except ValueError:
            raise ConfigError(f"{key}={one_line(raw)!r}: expected a number") from None
    if is_list(kind):
        return tuple(dict.fromkeys(text.replace(",", " ").split()))  # a repeated word once (duplicate_notes)
    if kind is Path:
        return Path(text).expanduser()
    if rule is not None and rule.fold_case:
        return text.lower()
    return text


# ---------------------------------------------------------------------------
# loading


def parse_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a config file, read as a shell reads them (``utils/config/envfile.py``)."""
    try:
        return read_env_file(path, label="config file")
    except EnvFileError as exc:
        raise ConfigError(str(exc)) from None


def _merged_values(config_file: Path | str | None, env: Mapping[str, str]) -> dict[str, str]:
    """The raw text of every key: the file's, overridden by the environment's."""
    path = Path(config_file or env.get("TPRIMAT_CONFIG") or DEFAULT_CONFIG_FILE)
    file_values = parse_env_file(path)
    known = {name.upper() for name in FIELD_TYPES} | {"GBS"}
    unknown = sorted(set(file_values) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {one_line(', '.join(unknown), 200)}; known keys: "
                          f"{', '.join(sorted(known))}")
    return {**file_values, **{k: v for k, v in env.items() if k in known}}


def duplicate_notes(config_file: Path | str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """One note per list key whose value repeats a word: :func:`_convert` keeps each word once, in first order
    (``MODELS="llama llama"`` would run one job twice into one file)."""
    env = dict(os.environ if environ is None else environ)
    notes = []
    for key, raw in _merged_values(config_file, env).items():
        if key != "GBS" and is_list(base_type(FIELD_TYPES[key.lower()])[0]):
            words = raw.replace(",", " ").split()
            repeated = [w for w in dict.fromkeys(words) if words.count(w) > 1]
            if repeated:
                notes.append(f"note: {key} lists {', '.join(repeated)} more than once; each runs once "
                             f"({key}={' '.join(dict.fromkeys(words))})")
    return notes


def load_config(
    config_file: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load ``config.env`` (or ``TPRIMAT_CONFIG``) with environment overrides (``environ``, default ``os.environ``):
    a variable named like a config key wins over the file (``MBS=2 ./shell/run_train.sh``)."""
    env = dict(os.environ if environ is None else environ)
    merged = _merged_values(config_file, env)
    kwargs: dict[str, Any] = {}
    for key, raw in merged.items():
        if key == "GBS":
            continue
        value = _convert(key, raw)
        if value is None and not base_type(FIELD_TYPES[key.lower()])[1]:
            continue  # empty: keep the default (chosen below for the folders)
        kwargs[key.lower()] = value
    if kwargs.get("data_dir") is None:
        kwargs["data_dir"] = Path(CONTAINER_DATA_DIR) if in_tprimat_container(env) else REPO_ROOT / "data_cache"
    if kwargs.get("output_dir") is None:
        kwargs["output_dir"] = REPO_ROOT / "output"
    for name in ("data_dir", "output_dir"):
        if not kwargs[name].is_absolute():
            kwargs[name] = (REPO_ROOT / kwargs[name]).resolve()
    explicit_gbs = None
    if merged.get("GBS", "").strip():
        try:
            explicit_gbs = int(merged["GBS"].strip())
        except ValueError:
            raise ConfigError(f"GBS={one_line(merged['GBS'])!r}: expected a whole number") from None
    cfg = Config(**kwargs)
    check_config(cfg, explicit_gbs)
    return cfg


def docker_env_values(cfg: Config) -> dict[str, str]:
    """The config part of the env file handed to ``docker run``: every key but GBS (derived: a fixed GBS would turn
    a later MBS/DP/GA override in the container into a mismatch error)."""
    return {key: value for key, value in cfg.as_env().items() if key != "GBS"}


# ---------------------------------------------------------------------------
# CLI

_EPILOG = """\
Environment variables with a key's name override config.env (MBS=2 ...). TPRIMAT_CONFIG names
another config file. Secrets (HF_TOKEN) come from the environment, else secrets.env, and are
never printed: --get refuses them. --docker-env-file writes every effective key except GBS
(derived), plus HF_TOKEN when one is set, as plain KEY=value lines (file mode 0600)."""


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.config.load",
        description="Print the effective tprimat config (config.env + environment overrides), validated. "
        "Exit 2 with one 'config error: KEY...' line when a value is bad.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, help="config file (default: $TPRIMAT_CONFIG or ./config.env)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--get", metavar="KEY", help="print one value, e.g. DATA_DIR or GBS")
    what.add_argument("--json", action="store_true", help="print every key as JSON")
    what.add_argument("--docker-env-file", type=Path, metavar="PATH",
                      help="write the env file handed to `docker run --env-file` (see below)")
    what.add_argument("--before-launch", metavar="PLATFORM", choices=PLATFORMS,
                      help="check what must hold before jobs start on PLATFORM (e.g. MODEL_SIZE=full is refused on "
                           "cpu) and print a note for every list key that repeats a word")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.get:
            key = args.get.upper()
            values = cfg.to_dict()
            if key in SECRET_KEYS:
                raise ConfigError(f"{key} is a secret; it is never printed")
            if key not in values:
                raise ConfigError(f"unknown key {one_line(args.get, 40)!r}; known: {', '.join(sorted(values))}")
            print(format_value(cfg.as_env().get(key, values[key])))
        elif args.json:
            print(json.dumps(cfg.to_dict(), indent=2))
        elif args.docker_env_file:
            write_docker_env_file(args.docker_env_file, docker_env_values(cfg))
        elif args.before_launch:
            problem = launch_problem(args.before_launch, cfg.model_size) or _sequence_problem(cfg)
            if problem:
                raise ConfigError(problem)
            for note in duplicate_notes(args.config):
                print(note)
        else:
            for key, value in cfg.as_env().items():
                print(f"{key}={value}")
            print(f"# derived: GBS={cfg.gbs} WORLD_SIZE={cfg.world_size}")
    except OSError as exc:
        print(f"configure: cannot write {exc.filename or args.docker_env_file}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    return 0


def _sequence_problem(cfg: Config) -> str | None:
    """The first model of MODELS whose shape cannot take SL (``utils/config/rules.py``'s ``sequence_problem``)."""
    for model in cfg.models:
        problem = sequence_problem(cfg.sl, workload_shape(cfg, model))
        if problem:
            return problem
    return None


if __name__ == "__main__":
    sys.exit(main())
