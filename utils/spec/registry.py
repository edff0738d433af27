"""The one registry of platforms, frameworks and models.

Why one table: argparse ``choices``, the job list, the comparison's labels, the
result model and the shell (through ``python -m utils.config.load --get``) all need
these lists. Kept here, adding a model or a framework is one entry (plus its
launcher or shape), and no second list can fall out of step.

Nothing here imports the project: the launcher plugin of a framework is named by
its module path and imported by ``train/launch/context.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Platform:
    key: str  # amd | nvd | cpu
    display_name: str  # AMD | NVIDIA | CPU
    software_stack: str  # rocm | cuda | cpu


@dataclass(frozen=True)
class Framework:
    key: str
    display_name: str
    platforms: tuple[str, ...]  # where it runs, in the platforms' order
    plugin: str  # module implementing train/launch/contract.py's Plugin, imported by train/launch/context.py
    # Which node writes a multi-node job's result: "first" (global rank 0 measures in-process)
    # or "last" (Megatron and Primus print their iteration lines on the last rank).
    result_node: str = "first"
    # The framework_versions fields that identify the code it executed (two results of one framework
    # that differ in one measure two versions, not two GPUs: evaluate/analysis/settings_diff.py). torch, CUDA
    # and ROCm differ between vendors by construction and are shown in the hardware table instead.
    version_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Model:
    key: str
    display_name: str


PLATFORMS: dict[str, Platform] = {
    p.key: p
    for p in (
        Platform("amd", "AMD", "rocm"),
        Platform("nvd", "NVIDIA", "cuda"),
        Platform("cpu", "CPU", "cpu"),
    )
}

FRAMEWORKS: dict[str, Framework] = {
    f.key: f
    for f in (
        Framework("mega", "Megatron-LM", ("amd", "nvd"), "train.mega.plugin", result_node="last",
                  version_fields=("megatron_lm_commit",)),
        Framework("prim", "Primus", ("amd",), "train.prim.plugin", result_node="last",
                  version_fields=("primus_commit", "primus", "megatron_lm_commit")),
        Framework("nemo", "NeMo", ("nvd",), "train.nemo.plugin", version_fields=("nemo", "megatron_core")),
        Framework("tran", "Transformers (tran)", ("amd", "nvd", "cpu"), "train.tran.plugin",
                  version_fields=("transformers",)),
        Framework("deep", "DeepSpeed", ("amd", "nvd", "cpu"), "train.deep.plugin",
                  version_fields=("deepspeed", "transformers")),
    )
}

# The framework of a published run imported from MLPerf's results (utils/schema/model.py ``Published``): no stack
# tprimat launches (never a choice of FRAMEWORK), the name its results and their files carry.
PUBLISHED_FRAMEWORK = "mlperf"

# One fixed colour per framework in every figure (Okabe-Ito, readable with colour-blindness); platforms are
# told apart by line style and marker (evaluate/render/plots.py), so `nvd · mega` and `amd · mega` share a colour.
FRAMEWORK_COLORS: dict[str, str] = {
    "mega": "#0072B2",  # blue
    "prim": "#D55E00",  # vermilion
    "nemo": "#009E73",  # bluish green
    "tran": "#CC79A7",  # reddish purple
    "deep": "#E69F00",  # orange
}
UNKNOWN_FRAMEWORK_COLOR = "#555555"

MODELS: dict[str, Model] = {
    m.key: m
    for m in (
        Model("llama", "Llama 3.1 8B"),
        Model("qwen", "Qwen 2.5 7B"),
        Model("mistral", "Mistral 7B v0.3"),
    )
}

# The vendor stack that stands in for the other vendor's when asked for by name: Primus <-> NeMo.
VENDOR_STACK_MAP: dict[tuple[str, str], str] = {
    ("nvd", "prim"): "nemo",
    ("amd", "nemo"): "prim",
}


# FRAMEWORK=all: every framework of the platform (train/launch/jobs.py expands it).
FRAMEWORK_ALL = "all"


def platform_names() -> tuple[str, ...]:
    return tuple(PLATFORMS)


def framework_names() -> tuple[str, ...]:
    return tuple(FRAMEWORKS)


def framework_choices() -> tuple[str, ...]:
    """What ``FRAMEWORK`` may name: a framework or ``all``."""
    return (*FRAMEWORKS, FRAMEWORK_ALL)


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def frameworks_on(platform: str) -> tuple[str, ...]:
    """The frameworks ``platform`` runs, in registry order (``FRAMEWORK=all``)."""
    if platform not in PLATFORMS:
        raise ValueError(f"platform {platform!r} is not valid; use one of: {', '.join(PLATFORMS)}")
    return tuple(key for key, framework in FRAMEWORKS.items() if platform in framework.platforms)


def display_name(kind: str, key: str) -> str:
    """Human name of a platform, framework or model key; the key itself when unknown."""
    table = {"platform": PLATFORMS, "framework": FRAMEWORKS, "model": MODELS}[kind]
    entry = table.get(key)
    return entry.display_name if entry is not None else key


def framework_color(key: str) -> str:
    """The framework's colour in every figure (grey for a framework the registry does not know)."""
    return FRAMEWORK_COLORS.get(key, UNKNOWN_FRAMEWORK_COLOR)
