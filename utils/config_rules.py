"""The per-key rules of the config: what each ``config.env`` key accepts beyond its type.

Why a table: every key is checked the same way (choices, minimum, maximum), a new key
is one row, and the hostile-input tests walk the table itself, so a key added here is
covered by them without anyone writing a test for it. Two checks follow from the type
alone and need no row: every float must be finite (``nan``/``inf`` would pass a bound
check and then break the result's JSON), and every list must be non-empty.

``utils/configure.py`` owns the config; it converts the text and calls :func:`check_rules`,
then its own cross-key checks.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from utils.registry import framework_choices, model_names, platform_names


class ConfigError(ValueError):
    """A config value is missing, malformed or inconsistent. The message names the key."""


# The words some keys accept. Platforms, frameworks and models come from utils/registry.py.
PLATFORMS = platform_names()
FRAMEWORK_CHOICES = framework_choices()
MODEL_NAMES = model_names()
MODEL_SIZES = ("full", "tiny")
DATASETS = ("bc", "c4", "sample")
PRECISIONS = ("bf16", "fp16", "fp32")
LR_DECAYS = ("cosine", "linear", "constant")
# PROFILE: the fairness table on every stack, or each vendor's published recipe (train/profiles/).
PROFILES = ("identical", "tuned")
# PROFILE_FALLBACK: what a job with no vendor recipe runs under PROFILE=tuned (empty: it is an error).
PROFILE_FALLBACKS = ("identical",)

# Upper bound of every count (steps, sizes, ranks, workers): these values reach C int
# fields (NCCL ranks and world sizes, data-loader and dataset indices) and JSON readers,
# and 2**31 - 1 is the largest every one of them holds exactly.
MAX_COUNT = 2**31 - 1


@dataclass(frozen=True)
class Rule:
    """What one key accepts beyond its type.

    ``choices`` apply to each word of a list key. Bounds are inclusive unless
    ``above_minimum`` / ``below_maximum``. ``path_prefix`` admits ``<prefix><path>``
    besides the choices (``DATASET=local:/corpus.jsonl``). ``describe`` replaces the
    generic bound message where a range reads better as one phrase.
    """

    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False
    below_maximum: bool = False
    path_prefix: str | None = None
    fold_case: bool = False
    describe: str | None = None


_COUNT = Rule(minimum=1, maximum=MAX_COUNT)  # how many of something: at least one
_INDEX = Rule(minimum=0, maximum=MAX_COUNT)  # a step, rank, seed or optional amount: zero allowed
# Adam-family updates move each weight by about LR per step whatever the gradient's scale, so
# an LR above 1 (weights are initialised at INIT_STD ~ 0.02) diverges on the first step.
_STEP_SIZE = Rule(minimum=0.0, maximum=1.0)
_NON_NEGATIVE = Rule(minimum=0.0)

RULES: dict[str, Rule] = {
    "platform": Rule(choices=PLATFORMS, fold_case=True),
    "dataset": Rule(choices=DATASETS, path_prefix="local:"),
    "framework": Rule(choices=FRAMEWORK_CHOICES),
    "models": Rule(choices=MODEL_NAMES),
    "model_size": Rule(choices=MODEL_SIZES),
    "seed": _INDEX,
    "mbs": _COUNT,
    "sl": _COUNT,
    "lr": dataclasses.replace(_STEP_SIZE, above_minimum=True),
    "min_lr": _STEP_SIZE,
    "lr_decay": Rule(choices=LR_DECAYS),
    "warmup_steps": _INDEX,
    "train_iters": _COUNT,
    "weight_decay": _NON_NEGATIVE,
    "beta1": Rule(minimum=0.0, maximum=1.0, below_maximum=True, describe="in [0, 1)"),
    "beta2": Rule(minimum=0.0, maximum=1.0, below_maximum=True, describe="in [0, 1)"),
    "grad_clip": _NON_NEGATIVE,  # 0 turns clipping off
    "init_std": _NON_NEGATIVE,
    "tp": _COUNT,
    "pp": _COUNT,
    "cp": _COUNT,
    "dp": _COUNT,
    "ga": _COUNT,
    "precision": Rule(choices=PRECISIONS),
    "profile": Rule(choices=PROFILES, fold_case=True),
    "profile_fallback": Rule(choices=PROFILE_FALLBACKS, fold_case=True),
    "data_samples": _COUNT,
    # The generated corpus is written to DATA_DIR in full: a terabyte is beyond any offline test or demo.
    "sample_mb": Rule(minimum=0.0, above_minimum=True, maximum=1_000_000.0),
    "sample_vocab": _COUNT,
    "min_doc_chars": _INDEX,
    "encode_workers": _INDEX,  # 0 = one per CPU core
    "nnodes": _COUNT,
    "node_rank": _INDEX,
    "master_port": Rule(minimum=1, maximum=65535, describe="a TCP port (1-65535)"),
    "gpus_per_node": _COUNT,
    "runs": _COUNT,
    "measure_skip_steps": _INDEX,
    "profile_step_start": _INDEX,
    "profile_step_end": _INDEX,
}


def base_type(hint: Any) -> tuple[Any, bool]:
    """``(type, optional)`` of a field's type hint: ``int | None`` gives ``(int, True)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def is_list(kind: Any) -> bool:
    """A list key (``tuple[str, ...]``): space- or comma-separated words in config.env."""
    return typing.get_origin(kind) is tuple


def _number(value: float) -> str:
    """A bound as people write it: 1, 65535, 2147483647, 0.5 (not 2.14748e+09)."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def _bound_problem(rule: Rule, value: float) -> str | None:
    """What is wrong with ``value`` against the rule's bounds, or None."""
    low, high = rule.minimum, rule.maximum
    too_low = low is not None and (value <= low if rule.above_minimum else value < low)
    too_high = high is not None and (value >= high if rule.below_maximum else value > high)
    if not (too_low or too_high):
        return None
    if rule.describe:
        return f"must be {rule.describe}"
    if too_low:
        if rule.above_minimum:
            return f"must be greater than {_number(low)}"
        return "must not be negative" if low == 0 else f"must be at least {_number(low)}"
    return f"must be below {_number(high)}" if rule.below_maximum else f"must be at most {_number(high)}"


def _check_choice(key: str, word: str, rule: Rule) -> None:
    if word in rule.choices:
        return
    prefix = rule.path_prefix
    if prefix and word.startswith(prefix):
        if word == prefix:
            raise ConfigError(f"{key}={word!r}: a path must follow {prefix}, e.g. {prefix}/data/corpus.jsonl")
        return
    allowed = (*rule.choices, f"{prefix}<path>") if prefix else rule.choices
    raise ConfigError(f"{key}={word!r}: allowed values are {', '.join(allowed)}")


def check_rules(values: Mapping[str, Any], field_types: Mapping[str, Any]) -> None:
    """Type-level checks (finite floats, non-empty lists) and each key's row of :data:`RULES`.

    ``values`` and ``field_types`` are keyed by field name (the lower-cased config key).
    """
    for name, hint in field_types.items():
        key, value = name.upper(), values[name]
        if value is None:
            continue
        kind, _ = base_type(hint)
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be a finite number")
        rule = RULES.get(name)
        if is_list(kind):
            if not value:
                allowed = f": allowed values are {', '.join(rule.choices)}" if rule and rule.choices else ""
                raise ConfigError(f"{key} is empty{allowed}")
            words = value
        else:
            words = (value,)
        if rule is None:
            continue
        if rule.choices:
            for word in words:
                _check_choice(key, word, rule)
        elif kind in (int, float):
            problem = _bound_problem(rule, value)
            if problem:
                raise ConfigError(f"{key}={value}: {problem}")
