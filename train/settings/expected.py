"""What a vendor job must run, per setting: the setting rules of ``train/settings/rules.py`` applied to one job.

The launchers take the settings that are not ``config.env`` keys from :data:`FIXED`, and the preflight compares
what each framework *resolved* with :func:`expected_settings`: one table feeds both, so a framework that silently
changes a value is caught. The names below are views of the table, never a second spelling of it; keys are
tprimat's flat names, explained in docs/CONFORMANCE.md.
"""

from __future__ import annotations

from typing import Any

from train.settings.rules import NOT_LOCAL, RULES, SETTINGS, Job
from utils.config.model import WORKLOAD_KEYS, Config
from utils.spec.models import ModelShape

FIXED: dict[str, Any] = {r.key: r.ref for r in SETTINGS if r.source == "fixed"}
FP8_FIXED: dict[str, Any] = {r.key: r.ref for r in SETTINGS if r.source == "fixed under FP8"}
ATTENTION_BACKEND: dict[str, str] = RULES["attention_backend"].ref
GRADIENT_ACCUMULATION_FUSION: dict[str, bool] = RULES["gradient_accumulation_fusion"].ref
# MEGATRON_IMPL (mega and prim, whose layers are Megatron's): the images' Transformer Engine layers, or Megatron's
# own local ones for a machine without Transformer Engine and apex (each rule's note says why its value changes).
MEGATRON_IMPL_FRAMEWORKS = ("mega", "prim")
LOCAL_IMPL: dict[str, Any] = {r.key: r.local for r in SETTINGS if r.local is not NOT_LOCAL}
# config.env workload key -> the effective setting that must equal it (utils.config.model.WORKLOAD_KEYS spelling).
WORKLOAD_SETTINGS = {r.ref.upper(): r.key for r in SETTINGS
                     if r.source == "config.env" and r.ref.upper() in WORKLOAD_KEYS}


def implementation_settings(megatron_impl: str) -> dict[str, Any]:
    """What MEGATRON_IMPL decides for a Megatron framework: its ``transformer_impl`` and, for local, LOCAL_IMPL."""
    return {r.key: megatron_impl for r in SETTINGS if r.source == "MEGATRON_IMPL"} | (
        LOCAL_IMPL if megatron_impl == "local" else {})


def exempt(framework: str) -> dict[str, str]:
    """The settings ``framework`` has no such setting for (compared only where a framework has them), with why."""
    return {r.key: r.exempt[framework] for r in SETTINGS if framework in r.exempt}


def expected_settings(cfg: Config, platform: str, shape: ModelShape, padded_vocab: int) -> dict[str, Any]:
    """Every setting's required effective value for one vendor job (``padded_vocab``: Megatron's padded size)."""
    if platform not in ATTENTION_BACKEND:
        raise ValueError(f"platform {platform!r}: the vendor stacks run on {', '.join(ATTENTION_BACKEND)}")
    job = Job(cfg, platform, shape, padded_vocab)
    return {r.key: r.expected(job) for r in SETTINGS
            if r.source != "MEGATRON_IMPL" and (cfg.fp8 or r.source != "fixed under FP8")}


def required_settings(cfg: Config, platform: str, framework: str, shape: ModelShape, padded_vocab: int,
                      recipe: dict[str, Any]) -> dict[str, Any]:
    """What a vendor job must run: :func:`expected_settings`, a tuned ``recipe``'s settings over them (``{}`` when
    none), and MEGATRON_IMPL's (:func:`implementation_settings`) over both for mega and prim, whose layers are
    Megatron's; ``padded_vocab``: the vocabulary the launcher planned."""
    implementation = implementation_settings(cfg.megatron_impl) if framework in MEGATRON_IMPL_FRAMEWORKS else {}
    return {**expected_settings(cfg, platform, shape, padded_vocab), **recipe, **implementation}


def differences(expected: dict[str, Any], effective: dict[str, Any], framework: str) -> list[tuple[str, Any, Any]]:
    """(setting, expected, effective) for every setting the framework resolved to another value.

    A setting missing from ``effective`` counts as a difference (the resolver must read
    every key), except those the framework is exempt from (:func:`exempt`).
    """
    skip = exempt(framework)
    out = []
    for key, want in expected.items():
        if key in skip:
            continue
        got = effective.get(key, "<not resolved>")
        if not same(want, got):
            out.append((key, want, got))
    return out


def same(want: Any, got: Any) -> bool:
    """Equal, with floats compared to 1e-9 relative (3e-4 parsed by three parsers): rules.HOW's ``equal``."""
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(want - got) <= 1e-9 * max(abs(want), abs(got), 1e-30)
    return want == got


def contradictions(workload: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Where a result's effective settings contradict its own workload (for ``evaluate/analysis/validation.py``).

    Only keys present on both sides are compared (a ``tran`` record or an older result may
    lack some); FP8 is compared as on/off.
    """
    found = []
    for key, setting in WORKLOAD_SETTINGS.items():
        if workload.get(key) is None or settings.get(setting) is None:
            continue
        if not same(workload[key], settings[setting]):
            found.append(f"effective {setting}={settings[setting]!r} but workload {key}={workload[key]!r}")
    if workload.get("FP8") is not None and "fp8" in settings and bool(settings["fp8"]) != bool(workload["FP8"]):
        found.append(f"effective fp8={settings['fp8']!r} but workload FP8={workload['FP8']!r}")
    return found
