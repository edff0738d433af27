"""The per-key rules of the config: what each ``config.env`` key accepts beyond its type.

Why a table: every key is checked the same way (choices, minimum, maximum), a new key is one row, and the
hostile-input tests walk the table itself (each number needs both bounds).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from utils.io.sanitise import one_line, unsafe_character
from utils.schema.limits import MAX_STEPS
from utils.spec.registry import framework_choices, model_names, platform_names


class ConfigError(ValueError):
    """A config value is missing, malformed or inconsistent. The message names the key."""


# The words some keys accept. Platforms, frameworks and models come from utils/spec/registry.py.
PLATFORMS = platform_names()
FRAMEWORK_CHOICES = framework_choices()
MODEL_NAMES = model_names()
MODEL_SIZES = ("full", "tiny")
DATASETS = ("bc", "c4", "sample")
PRECISIONS = ("bf16", "fp16", "fp32")
CPU_PRECISIONS = ("auto", *PRECISIONS)
LR_DECAYS = ("cosine", "linear", "constant")
PROFILES = ("identical", "tuned", "mlperf")
PROFILE_FALLBACKS = ("identical",)
BOS_POLICIES = ("megatron", "tokenizer")
MEGATRON_IMPLS = ("transformer_engine", "local")

# Upper bound of every count (steps, sizes, ranks, workers): these values reach C int fields (NCCL ranks and world
# sizes, data-loader and dataset indices) and JSON readers, and 2**31 - 1 is the largest every one holds exactly.
MAX_COUNT = 2**31 - 1
# The most steps a run may have (TRAIN_ITERS): the most a result holds (utils/schema/limits.py MAX_STEPS, which says
# why), so that every run's result can be read back.
MAX_TRAIN_ITERS = MAX_STEPS
# The longest text value (a path, a name, a word of a list): Linux's PATH_MAX, the longest path a file can have.
MAX_TEXT = 4096


@dataclass(frozen=True)
class Rule:
    """What one key accepts beyond its type. ``choices`` apply to each word of a list key; ``pattern`` to a text key as
    a whole. Bounds are inclusive unless ``above_minimum`` / ``below_maximum``. ``path_prefix`` admits
    ``<prefix><path>`` besides the choices (``DATASET=local:/corpus.jsonl``). ``describe`` replaces the generic bound
    message where a range reads better as one phrase."""

    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False
    below_maximum: bool = False
    path_prefix: str | None = None
    fold_case: bool = False
    describe: str | None = None
    pattern: str | None = None  # a text key must match this regular expression in full
    empty_is_default: bool = False  # an empty value means the key's default (as for a path)


_COUNT = Rule(minimum=1, maximum=MAX_COUNT)  # how many of something: at least one
_INDEX = Rule(minimum=0, maximum=MAX_COUNT)  # a step, rank, seed or optional amount: zero allowed
# Adam-family updates move each weight by about LR per step whatever the gradient's scale, so
# an LR above 1 (weights are initialised at INIT_STD ~ 0.02) diverges on the first step.
_STEP_SIZE = Rule(minimum=0.0, maximum=1.0)

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
    "train_iters": Rule(minimum=1, maximum=MAX_TRAIN_ITERS),
    # Decoupled weight decay multiplies every weight by 1 - LR*WEIGHT_DECAY each step: with LR up to 1,
    # a decay up to 1 keeps that factor from going negative (published recipes use 0.01-0.1).
    "weight_decay": Rule(minimum=0.0, maximum=1.0),
    "beta1": Rule(minimum=0.0, maximum=1.0, below_maximum=True, describe="in [0, 1)"),
    "beta2": Rule(minimum=0.0, maximum=1.0, below_maximum=True, describe="in [0, 1)"),
    # 0 turns clipping off; recipes clip at 0.3-1.0, and a bound above 100 never binds on a run that is
    # not already diverging, so a larger value is a typo rather than a setting.
    "grad_clip": Rule(minimum=0.0, maximum=100.0),
    # Weights drawn with a standard deviation above 1 grow every layer's output by a factor of at least
    # sqrt(hidden size) (8 at the tiny shapes' 64): such a model diverges before its first step ends.
    "init_std": Rule(minimum=0.0, maximum=1.0),
    "tp": _COUNT,
    "pp": _COUNT,
    "cp": _COUNT,
    "dp": _COUNT,
    "ga": _COUNT,
    "precision": Rule(choices=PRECISIONS),
    "cpu_precision": Rule(choices=CPU_PRECISIONS, fold_case=True),
    # DeepSpeed's ZeRO stages: 0 off, 1 optimizer state, 2 + gradients, 3 + parameters partitioned.
    "zero_stage": Rule(minimum=0, maximum=3, describe="0, 1, 2 or 3 (a DeepSpeed ZeRO stage)"),
    # A proxy's depth: at least one layer; the model's own depth is the upper bound (utils/config/model.py checks it
    # per model, since it depends on MODELS and MODEL_SIZE).
    "model_layers": _COUNT,
    "profile": Rule(choices=PROFILES, fold_case=True),
    "lr_decay_iters": _COUNT,
    # Adam's epsilon above 1 would dominate every second-moment estimate (recipes use 1e-8 to 1e-5).
    "adam_eps": Rule(minimum=0.0, above_minimum=True, maximum=1.0),
    "profile_fallback": Rule(choices=PROFILE_FALLBACKS, fold_case=True),
    "data_samples": _COUNT,
    # The generated corpus is written to DATA_DIR in full: a terabyte is beyond any offline test or demo.
    "sample_mb": Rule(minimum=0.0, above_minimum=True, maximum=1_000_000.0),
    "sample_vocab": _COUNT,
    "min_doc_chars": _INDEX,
    "encode_workers": _INDEX,  # 0 = one per CPU core
    "bos_policy": Rule(choices=BOS_POLICIES, fold_case=True),
    "nnodes": _COUNT,
    "node_rank": _INDEX,
    "master_port": Rule(minimum=1, maximum=65535, describe="a TCP port (1-65535)"),
    # A host name (RFC 1123 labels) or an IPv4/IPv6 address; empty means the default, localhost (issue 26:
    # torchrun given '' or a malformed name retried until killed). Whether it resolves: utils/machine/rendezvous.py.
    "master_addr": Rule(pattern=r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                                r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*",
                        empty_is_default=True, describe="a host name or an IP address, e.g. node001 or 10.0.0.1"),
    # Each sizes what starts at once: a node holds at most 16 accelerators today (cpu: one process per "GPU"), and
    # repeats are MLPerf's 10 or a few more.
    "gpus_per_node": Rule(minimum=1, maximum=64),
    "runs": Rule(minimum=1, maximum=1000),
    "measure_skip_steps": _INDEX,
    "profile_step_start": _INDEX,
    "profile_step_end": _INDEX,
    "megatron_impl": Rule(choices=MEGATRON_IMPLS),
    # A cross-entropy of 1000 nats per token is beyond any vocabulary (ln of its size is ~12): larger is a typo.
    "eval_interval": _INDEX,
    "eval_samples": _INDEX,
    "target_loss": Rule(minimum=0.0, above_minimum=True, maximum=1000.0),
    # A git tag or commit of Megatron-LM, cloned into both images (docs/CONFORMANCE.md): the characters git allows in
    # a ref name, so the value is safe to pass to `git checkout` and a Docker build argument.
    "megatron_ref": Rule(pattern=r"(?!.*\.\.)(?:[0-9a-f]{7,40}|[A-Za-z0-9][A-Za-z0-9._/-]{0,99})",
                         describe="a Megatron-LM tag or commit, e.g. core_v0.12.0 or 847781764f"),
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
            raise ConfigError(f"{key}={one_line(word)!r}: a path must follow {prefix}, e.g. {prefix}/data/corpus.jsonl")
        return
    allowed = (*rule.choices, f"{prefix}<path>") if prefix else rule.choices
    raise ConfigError(f"{key}={one_line(word)!r}: allowed values are {', '.join(allowed)}")


def _text_problem(key: str, value: Any) -> str | None:
    """Why a text, path or list value is refused (None: it is not): a control character or one that reorders what
    a reader sees, or more characters than a path can have. Such a value reaches file names, docker's env file, logs
    and the shell's job list; no path or name needs one."""
    words = value if isinstance(value, tuple) else (value,)
    for word in words:
        if not isinstance(word, (str, PurePath)):
            continue
        if found := unsafe_character(str(word)):
            return f"{key}={one_line(word)!s}: holds a control character ({found}); paths and names may not"
        if len(str(word)) > MAX_TEXT:
            return f"{key}={one_line(word)!s}: {len(str(word)):,} characters, more than a path can have ({MAX_TEXT})"
    return None


def check_rules(values: Mapping[str, Any], field_types: Mapping[str, Any]) -> None:
    """Type-level checks (finite floats, non-empty lists, no control character in a text) and each key's row of
    :data:`RULES`. ``values`` and ``field_types`` are keyed by field name (the lower-cased config key)."""
    for name, hint in field_types.items():
        key, value = name.upper(), values[name]
        if value is None:
            continue
        kind, _ = base_type(hint)
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be a finite number")
        text_problem = _text_problem(key, value)
        if text_problem:
            raise ConfigError(text_problem)
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
        if rule.pattern and not re.fullmatch(rule.pattern, str(value)):
            expected = rule.describe or f"a value matching {rule.pattern}"
            raise ConfigError(f"{key}={one_line(value)!r}: expected {expected}")
        if rule.choices:
            for word in words:
                _check_choice(key, word, rule)
        elif kind in (int, float):
            problem = _bound_problem(rule, value)
            if problem:
                raise ConfigError(f"{key}={value}: {problem}")


def launch_problem(platform: str, model_size: str) -> str | None:
    """A setting that cannot run on ``platform`` at all, refused before a job starts (None: none): the cpu platform
    runs tiny shapes only (a full model would die out of memory minutes later)."""
    if platform == "cpu" and model_size == "full":
        return ("MODEL_SIZE=full on PLATFORM=cpu: the cpu platform runs tiny shapes only (a full 7-8B model does "
                "not train in a CPU's memory and time); set MODEL_SIZE=tiny")
    return None


def sequence_problem(seq_len: int, shape: Any) -> str | None:
    """Why ``shape`` cannot take ``seq_len`` tokens a sequence (its ``max_position_embeddings``; None: it can),
    refused before launch rather than after minutes without a step."""
    if seq_len <= shape.max_position_embeddings:
        return None
    return (f"SL={seq_len} is longer than {shape.display_name} can take ({shape.max_position_embeddings} positions); "
            f"set SL to at most {shape.max_position_embeddings}")


def tensor_split_problem(shape: Any, tp: int) -> str | None:
    """Why ``shape``'s attention cannot be split over ``tp`` tensor-parallel ranks (None: it can): every vendor stack
    splits heads and query groups over TP, and Megatron refuses a TP that divides either not; refused before launch."""
    heads, groups = shape.num_attention_heads, shape.num_query_groups
    if tp <= 1 or (heads % tp == 0 and groups % tp == 0):
        return None
    fits = [str(size) for size in range(1, math.gcd(heads, groups) + 1) if heads % size == 0 and groups % size == 0]
    return (f"TP={tp} does not divide {shape.display_name}'s {heads} heads and {groups} query groups, so no stack "
            f"can split its attention over {tp} ranks (TP {', '.join(fits)} can)")
