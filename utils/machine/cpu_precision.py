"""CPU_PRECISION: the precision a job on the ``cpu`` platform computes in, from what this CPU computes natively.

Why: a CPU without bf16 instructions emulates bf16 (a measured 0.3 GFLOP/s against fp32's 190: docs/PERFORMANCE.md),
and fp32 is both faster there and exact. ``auto`` (the default) is PRECISION where native, else fp32; the choice
replaces ``Config.precision`` (:func:`apply_cpu_precision`), so every record says what ran.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from utils.config.model import Config

AUTO = "auto"
CPU_PLATFORM = "cpu"
CPUINFO = Path("/proc/cpuinfo")
# The CPU flags (``/proc/cpuinfo``: x86 ``flags``, Arm ``Features``) that mean native arithmetic in a precision.
NATIVE_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16", "bf16"),
    "fp16": ("avx512_fp16", "amx_fp16", "asimdhp"),
}
# oneDNN's CPU instruction sets by their ONEDNN_MAX_CPU_ISA names, as the bit masks of its dnnl_cpu_isa_t
# (oneDNN's include/oneapi/dnnl/dnnl_types.h): a set contains every set whose bits it holds.
ONEDNN_ISA_BITS: dict[str, int] = {
    "SSE41": 0x1, "AVX": 0x3, "AVX2": 0x7, "AVX2_VNNI": 0xF, "AVX2_VNNI_2": 0x1F,
    "AVX512_CORE": 0x27, "AVX512_CORE_VNNI": 0x67, "AVX512_CORE_BF16": 0xE7,
    "AVX10_1_512": 0x1EF, "AVX512_CORE_FP16": 0x1EF, "AVX10_1_512_AMX": 0xFEF, "AVX512_CORE_AMX": 0xFEF,
    "AVX10_1_512_AMX_FP16": 0x1FEF, "AVX512_CORE_AMX_FP16": 0x1FEF,
}
# The instruction set oneDNN computes each precision natively with (on x86).
ONEDNN_NATIVE_ISA = {"bf16": "AVX512_CORE_BF16", "fp16": "AVX512_CORE_FP16"}
ISA_CAP_KEYS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # the first one set wins, as in oneDNN


def read_cpu_flags(path: Path = CPUINFO) -> frozenset[str] | None:
    """This CPU's feature flags from ``path`` (x86 ``flags``, Arm ``Features``); None when unreadable."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_cpu_flags(text)


def parse_cpu_flags(text: str) -> frozenset[str] | None:
    """The flags of the first processor in ``/proc/cpuinfo`` text; None when it names none."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return None


def isa_cap(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(variable, value)`` of the oneDNN ISA cap in ``env``, upper-cased; None when none is set."""
    for key in ISA_CAP_KEYS:
        value = env.get(key, "").strip()
        if value:
            return key, value.upper()
    return None


def native_support(precision: str, flags: frozenset[str] | None, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether this CPU computes ``precision`` natively, and the evidence in a few words. oneDNN's cap comes first:
    below the instruction set it computes ``precision`` with, oneDNN emulates it whatever the flags say (and the
    evidence is then the same on every machine, as a test needs)."""
    if precision == "fp32":
        return True, "fp32 is native on every CPU"
    wanted = NATIVE_FLAGS.get(precision, ())
    cap, needed = isa_cap(env), ONEDNN_NATIVE_ISA.get(precision)
    note = ""
    if cap is not None and needed is not None and cap[1] != "ALL":
        key, value = cap
        bits = ONEDNN_ISA_BITS.get(value)
        if bits is None:
            note = f" ({key}={value} is no oneDNN ISA name: oneDNN ignores it)"
        elif bits & ONEDNN_ISA_BITS[needed] != ONEDNN_ISA_BITS[needed]:
            return False, f"no native {precision}: {key}={value} caps oneDNN below {needed}"
    if flags is None:
        return False, f"the CPU's flags could not be read ({CPUINFO}), so native {precision} is not known{note}"
    found = sorted(flag for flag in wanted if flag in flags)
    if not found:
        return False, f"no native {precision}: none of {', '.join(wanted)} among the CPU's flags{note}"
    return True, f"CPU flags {', '.join(found)}{note}"


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision one cpu job runs, and why: what the result records and the launch line says."""

    requested: str  # PRECISION
    setting: str  # CPU_PRECISION
    ran: str
    native: bool  # whether this CPU computes ``requested`` natively (as far as it says)
    reason: str

    @property
    def changed(self) -> bool:
        return self.ran != self.requested

    def line(self) -> str:
        """The one line the launch prints."""
        return f"cpu precision: {self.ran} ({self.reason})"

    def training_fields(self) -> dict[str, str]:
        """What ``training_config`` records beside ``precision_effective`` (the precision that ran)."""
        return {"precision_requested": self.requested, "precision_reason": self.reason}

    def settings(self) -> dict[str, str | bool]:
        """What ``effective_settings.settings`` records beside ``precision`` (the precision that ran)."""
        return {"cpu_precision": self.setting, f"cpu_native_{self.requested}": self.native,
                "precision_reason": self.reason}


def choose(requested: str, setting: str, fp8: bool, flags: frozenset[str] | None,
           env: Mapping[str, str]) -> PrecisionChoice:
    """The precision a cpu job runs for PRECISION=``requested`` and CPU_PRECISION=``setting`` (pure)."""
    native, evidence = native_support(requested, flags, env)
    if setting != AUTO:
        how = "natively" if native_support(setting, flags, env)[0] else "emulated: this CPU has no native " + setting
        return PrecisionChoice(requested, setting, setting, native,
                               f"CPU_PRECISION={setting}, {how}; PRECISION={requested}")
    if fp8:
        return PrecisionChoice(requested, setting, requested, native,
                               f"PRECISION={requested} with FP8=true, left as configured")
    if native:
        return PrecisionChoice(requested, setting, requested, native,
                               f"PRECISION={requested}, CPU_PRECISION=auto: {evidence}")
    return PrecisionChoice(requested, setting, "fp32", native,
                           f"PRECISION={requested}, CPU_PRECISION=auto: {evidence}, so fp32, which is faster here and "
                           f"rounds less; CPU_PRECISION={requested} runs emulated {requested}")


def cpu_precision(cfg: Config, platform: str, flags: frozenset[str] | None = None,
                  env: Mapping[str, str] | None = None, read_flags: bool = True) -> PrecisionChoice | None:
    """The choice for ``cfg`` on ``platform``; None off the cpu platform (GPUs run PRECISION as configured). ``flags``
    and ``env`` are injectable (tests); by default this CPU's flags and ``os.environ``."""
    if platform != CPU_PLATFORM:
        return None
    if flags is None and read_flags:
        flags = read_cpu_flags()
    return choose(cfg.precision, cfg.cpu_precision, cfg.fp8, flags, os.environ if env is None else env)


def apply_cpu_precision(cfg: Config, platform: str, flags: frozenset[str] | None = None,
                        env: Mapping[str, str] | None = None) -> tuple[Config, PrecisionChoice | None]:
    """``cfg`` with the precision the job runs (only ``precision`` changes), and the choice (None off cpu)."""
    choice = cpu_precision(cfg, platform, flags, env)
    if choice is None or not choice.changed:
        return cfg, choice
    return dataclasses.replace(cfg, precision=choice.ran), choice
