"""CPU_PRECISION (utils/machine/cpu_precision.py): the precision a cpu job computes in, from the CPU's native support.

A CPU without native bf16 is simulated on any machine by the detection's injectable flags, or by capping oneDNN
below its bf16 instructions (``ONEDNN_MAX_CPU_ISA=AVX2``); the real tiny run with that cap is
tests/unit/train/frameworks/test_tran.py ``test_llama_tiny_run_is_ok_and_learns``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from tests.helpers.evaluate import make_result
from train.launch.context import job_context
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.config.rules import ConfigError
from utils.machine.cpu_precision import (
    PrecisionChoice,
    apply_cpu_precision,
    choose,
    native_support,
    parse_cpu_flags,
    read_cpu_flags,
)
from utils.schema.model import Result

BF16_CPU = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"})  # Sapphire Rapids, Zen 4
AVX512_CPU = frozenset({"avx2", "avx512f", "avx512bw", "avx512vl"})  # Skylake-SP: AVX-512 without bf16
AVX2_CPU = frozenset({"avx2", "fma"})
CAP = {"ONEDNN_MAX_CPU_ISA": "AVX2"}


def config(**keys: str):
    return load_config(REPO_ROOT / "config.env", environ={"PLATFORM": "cpu", **keys})


def test_flags_are_read_from_x86_and_arm_cpuinfo(tmp_path: Path) -> None:
    x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags : sse\n"
    assert parse_cpu_flags(x86) == {"fpu", "avx2", "avx512_bf16"}  # the first processor's
    assert parse_cpu_flags("processor\t: 0\nFeatures\t: fp asimd asimdhp bf16\n") == {"fp", "asimd", "asimdhp", "bf16"}
    assert parse_cpu_flags("processor : 0\n") is None
    assert read_cpu_flags(tmp_path / "missing") is None


@pytest.mark.parametrize(("flags", "env", "native", "evidence"), [
    (BF16_CPU, {}, True, "CPU flags amx_bf16, avx512_bf16"),
    (frozenset({"fp", "bf16"}), {}, True, "CPU flags bf16"),  # Arm
    (AVX512_CPU, {}, False, "none of avx512_bf16, amx_bf16, bf16 among the CPU's flags"),
    (AVX2_CPU, {}, False, "none of avx512_bf16"),
    (BF16_CPU, CAP, False, "ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN below AVX512_CORE_BF16"),
    (AVX2_CPU, {"DNNL_MAX_CPU_ISA": "avx512_core"}, False, "DNNL_MAX_CPU_ISA=AVX512_CORE caps oneDNN below"),
    (BF16_CPU, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, True, "CPU flags"),
    (BF16_CPU, {"ONEDNN_MAX_CPU_ISA": "all"}, True, "CPU flags"),
    (BF16_CPU, {"ONEDNN_MAX_CPU_ISA": "NONSENSE"}, True, "is no oneDNN ISA name: oneDNN ignores it"),
    (None, {}, False, "flags could not be read"),
])
def test_native_bf16_from_the_flags_and_the_onednn_cap(flags, env, native, evidence) -> None:
    found, why = native_support("bf16", flags, env)
    assert found is native and evidence in why


def test_fp32_is_native_everywhere_and_fp16_needs_its_own_flags() -> None:
    assert native_support("fp32", None, CAP)[0]
    assert not native_support("fp16", BF16_CPU, {})[0]
    assert native_support("fp16", frozenset({"avx512_fp16"}), {})[0]
    assert not native_support("fp16", frozenset({"avx512_fp16"}), {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"})[0]


def test_auto_runs_fp32_without_native_bf16_and_says_why() -> None:
    choice = choose("bf16", "auto", False, AVX512_CPU, {})
    assert (choice.requested, choice.ran, choice.native, choice.changed) == ("bf16", "fp32", False, True)
    assert choice.reason.startswith("PRECISION=bf16, CPU_PRECISION=auto: no native bf16")
    assert "CPU_PRECISION=bf16 runs emulated bf16" in choice.reason
    assert choice.line().startswith("cpu precision: fp32 (PRECISION=bf16")


def test_auto_keeps_native_bf16_and_an_explicit_setting_wins() -> None:
    assert choose("bf16", "auto", False, BF16_CPU, {}).ran == "bf16"
    assert choose("fp32", "auto", False, AVX2_CPU, {}).ran == "fp32"
    forced = choose("bf16", "bf16", False, AVX2_CPU, {})
    assert forced.ran == "bf16" and "emulated: this CPU has no native bf16" in forced.reason
    assert choose("bf16", "bf16", False, BF16_CPU, {}).reason.startswith("CPU_PRECISION=bf16, natively; PRECISION=bf16")
    assert choose("bf16", "fp32", False, BF16_CPU, {}).ran == "fp32"
    assert choose("bf16", "auto", True, AVX2_CPU, {}).ran == "bf16"  # FP8 runs on top of bf16: left as configured


def test_cpu_precision_is_a_validated_key_defaulting_to_auto() -> None:
    assert config().cpu_precision == "auto"
    assert config(CPU_PRECISION="FP32").cpu_precision == "fp32"
    with pytest.raises(ConfigError, match="CPU_PRECISION='fp64': allowed values are auto, bf16, fp16, fp32"):
        config(CPU_PRECISION="fp64")


def test_the_choice_replaces_the_precision_on_cpu_only() -> None:
    cfg = config()
    ran, choice = apply_cpu_precision(cfg, "cpu", flags=AVX2_CPU, env={})
    assert choice is not None and choice.ran == "fp32"
    assert (ran.precision, ran.precision_label, ran.workload()["PRECISION"]) == ("fp32", "fp32", "fp32")
    assert ran.workload() == {**cfg.workload(), "PRECISION": "fp32"}  # nothing else changes
    for platform in ("nvd", "amd"):  # the fairness table's precision, whatever the CPU or CPU_PRECISION
        assert apply_cpu_precision(config(CPU_PRECISION="fp32"), platform, flags=AVX2_CPU, env=CAP) == (
            config(CPU_PRECISION="fp32"), None)
    same, kept = apply_cpu_precision(cfg, "cpu", flags=BF16_CPU, env={})
    assert same is cfg and kept is not None and not kept.changed


def test_a_cpu_job_context_carries_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    ctx = job_context(config(), "cpu", "tran", "llama")
    assert ctx.cfg.precision == "fp32" and ctx.precision is not None and ctx.precision.requested == "bf16"
    gpu = job_context(config(), "nvd", "tran", "llama")
    assert gpu.cfg.precision == "bf16" and gpu.precision is None


def _ran(choice: PrecisionChoice):
    def mutate(result: Result) -> None:
        result.platform = "cpu"
        result.training_config = result.training_config.model_copy(update=choice.training_fields())
    return mutate


def test_compare_never_puts_cpu_bf16_and_fp32_runs_in_one_ratio_unsaid(tmp_path: Path) -> None:
    out = tmp_path / "output"
    native = choose("bf16", "auto", False, BF16_CPU, {})
    emulated = choose("bf16", "auto", False, AVX2_CPU, {})
    make_result(out, "cpu", "tran", mutate=_ran(native), PRECISION=native.ran)
    make_result(out, "cpu", "deep", mutate=_ran(emulated), PRECISION=emulated.ran)
    report = check_fairness(load_directory(out).results)
    assert not report.fair
    differences = {d.key: sorted(d.values.values()) for d in report.differences}
    assert differences == {"PRECISION": ["bf16", "fp32"], "precision_effective": ["bf16", "fp32"]}
