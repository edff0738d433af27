"""utils/measure/memory.py: the peak-memory estimate on the real shapes, against its H100 calibration measurements."""

from __future__ import annotations

import pytest

from utils.config.model import Config
from utils.machine.hardware import REFERENCE_DEVICES, device_memory, device_memory_gib
from utils.measure.memory import (
    GIB,
    Verdict,
    deep_recipe,
    estimate,
    megatron_recipe,
    recipe_for,
    tran_recipe,
)
from utils.spec.models import get_shape


def layout(**keys: int) -> Config:
    """A config with this parallel layout and batch (one GPU, no accumulation unless given)."""
    return Config(**{"dp": 1, "ga": 1, **keys})


H100 = device_memory("nvd", "NVIDIA H100 80GB HBM3")
MI300X = device_memory("amd", "AMD Instinct MI300X")
# The measurement (issue 22): Llama 3.1 8B's width with 8 of 32 layers, SL 2048, MBS 2, GA 4, DP 1, one H100.
PROXY = get_shape("llama", "full", layers=8)
PROXY_LAYOUT = layout(mbs=2, sl=2048, ga=4)
# The fairness table's full-size layout on one 8-GPU node (config.env): MBS 1, SL 2048, DP 8, GA 8.
NODE = layout(dp=8, mbs=1, sl=2048, ga=8)


@pytest.mark.parametrize(("recipe", "measured_gib"), [
    (tran_recipe("ddp", world_size=1), 60.3),  # one rank: fp32 weights, bf16 autocast, no DDP wrapper
    (deep_recipe(1), 58.3),  # ZeRO-1, DeepSpeed bf16
    (megatron_recipe("mega", transformer_impl="local"), 63.1),  # no Transformer Engine
])
def test_the_three_calibration_points_within_15_percent(recipe, measured_gib):
    peak = estimate(PROXY, PROXY_LAYOUT, recipe).peak_gib
    assert abs(peak / measured_gib - 1) <= 0.15, (recipe.framework, peak, measured_gib)


def test_state_bytes_are_the_hand_arithmetic():
    # tran on one rank: fp32 weights, fp32 gradients, two fp32 AdamW moments: 16 bytes per parameter.
    est = estimate(PROXY, PROXY_LAYOUT, tran_recipe("ddp", 1))
    params = PROXY.parameter_count()
    assert params == 2_795_573_248
    assert est.terms["weights"] + est.terms["gradients"] + est.terms["optimizer_states"] == 16 * params
    # 2 bytes for every matrix the autocast casts: 8 layers x 218,103,808 + the 525,336,576 output layer
    assert est.terms["autocast_weight_copies"] == 2 * (8 * 218_103_808 + 525_336_576)
    # bf16 Hugging Face activations, 4096 tokens: (22*4096 + 8*14336 + 4*1024) bytes per token and layer
    fsdp = estimate(PROXY, PROXY_LAYOUT, tran_recipe("fsdp2", 1))
    assert fsdp.terms["activations"] == 4096 * 8 * (22 * 4096 + 8 * 14336 + 4 * 1024)
    assert fsdp.terms["output_head"] == 4096 * 14 * 128256


def test_8b_on_one_gpu_refuses_with_both_numbers():
    full = get_shape("llama")
    for framework in ("tran", "deep", "mega"):
        est = estimate(full, layout(dp=1, mbs=1, sl=2048, ga=8),
                       recipe_for(framework, _cfg(dp=1, zero_stage=1)), H100)
        assert est.fits is False
        line = est.line()
        assert f"{est.peak_gib:.1f} GiB per GPU > 79.2 GiB on NVIDIA H100 80GB HBM3" in line
        assert "8.03 B params" in line and framework in line
    # 16 bytes per parameter alone: 8.03e9 x 16 = 128.5e9 bytes = 119.7 GiB > 79.2
    tran = estimate(full, layout(dp=1, mbs=1, sl=2048, ga=8), tran_recipe("fsdp2", 1), H100)
    assert tran.terms["weights"] + tran.terms["gradients"] + tran.terms["optimizer_states"] == 16 * 8_030_261_248


def test_8b_on_8_gpus_with_fsdp2_fits_80gb_and_ddp_does_not():
    full = get_shape("llama")
    fsdp = estimate(full, NODE, tran_recipe("fsdp2", 8), H100)
    assert fsdp.fits is True and fsdp.peak_gib < 79.2 * 0.9
    # Sharded: the 16 bytes per parameter are divided by the 8 ranks.
    assert fsdp.terms["optimizer_states"] == pytest.approx(8 * 8_030_261_248 / 8, rel=1e-6)
    ddp = estimate(full, NODE, tran_recipe("ddp", 8), H100)
    assert ddp.fits is False and ddp.peak_gib > 128.4e9 / GIB


def test_mi300x_holds_what_it_holds():
    full = get_shape("llama")
    assert MI300X.memory_gib == 192.0
    # DDP's replicated fp32 states (plus DDP's gradient buckets) fit the 192 GB MI300X but not an H100.
    ddp = [estimate(full, NODE, tran_recipe("ddp", 8), device) for device in (MI300X, H100)]
    assert [e.fits for e in ddp] == [True, False]
    # Every framework's 8-GPU layout fits the MI300X, and even one MI300X holds the whole 8B at MBS 1
    # (16 bytes per parameter = 119.7 GiB of states, 140-170 GiB in all), which no H100 does.
    for framework in ("tran", "deep", "mega", "prim"):
        assert estimate(full, NODE, recipe_for(framework, _cfg(dp=8)), MI300X).fits is True
        single = layout(dp=1, mbs=1, sl=2048, ga=8)
        one = estimate(full, single, recipe_for(framework, _cfg(dp=1)), MI300X)
        assert one.fits is True and 119.7 < one.peak_gib < 192.0, framework
        assert estimate(full, single, recipe_for(framework, _cfg(dp=1)), H100).fits is False, framework


def test_deep_stages_shrink_the_peak_and_zero1_fits_8_h100s():
    full = get_shape("llama")
    peaks = [estimate(full, NODE, deep_recipe(stage), H100).peak_gib for stage in (0, 1, 2, 3)]
    assert peaks == sorted(peaks, reverse=True)
    assert estimate(full, NODE, deep_recipe(1), H100).fits is True


def test_parallel_layouts_divide_the_states():
    full = get_shape("llama")
    recipe = megatron_recipe("mega")
    one = estimate(full, NODE, recipe)
    tp2 = estimate(full, layout(tp=2, dp=4, mbs=1, sl=2048, ga=8), recipe)
    pp2 = estimate(full, layout(pp=2, dp=4, mbs=1, sl=2048, ga=8), recipe)
    assert tp2.terms["weights"] == pytest.approx(one.terms["weights"] / 2, rel=1e-3)
    assert one.terms["weights"] * 0.5 < pp2.terms["weights"] < one.terms["weights"] * 0.6
    # 1F1B: the first stage holds PP micro-batches of its half of the layers.
    assert pp2.terms["activations"] == pytest.approx(one.terms["activations"], rel=1e-3)


def test_unknown_gpu_is_a_warning_with_a_reason_never_silence():
    value, reason = device_memory_gib("NVIDIA A100-SXM4-80GB")
    assert value is None and "not in the memory table" in reason
    device = device_memory("nvd", "NVIDIA A100-SXM4-80GB")
    est = estimate(get_shape("llama"), NODE, tran_recipe("fsdp2", 8), device)
    assert est.fits is None and "not checked" in est.line() and "not in the memory table" in est.line()
    record = est.record()
    assert record.fits is None and "not in the memory table" in record.reason


def test_a_platform_without_a_visible_gpu_is_sized_for_its_reference_gpu():
    nvd = device_memory("nvd")
    assert nvd.device_name == REFERENCE_DEVICES["nvd"] and nvd.memory_gib == 79.2 and "reference" in nvd.basis
    cpu = device_memory("cpu")
    assert cpu.memory_gib is None and "cpu" in cpu.reason


def test_the_record_keeps_the_numbers_and_the_force():
    est = estimate(get_shape("llama"), layout(dp=1, mbs=1, sl=2048, ga=8), tran_recipe("fsdp2", 1), H100)
    record = est.record(forced=True)
    assert record.forced and record.fits is False and record.peak_gb == round(est.peak_gib, 2)
    assert record.device_memory_gb == 79.2 and record.sharding == "FSDP2" and record.param_dtype == "bf16"
    assert record.model == "Llama 3.1 8B" and record.parameters == 8_030_261_248


def test_proxy_shape_carries_its_label_into_the_estimate():
    assert estimate(PROXY, PROXY_LAYOUT, deep_recipe(1)).model_label == "Llama 3.1 8B [8 of 32 layers]"


def test_bad_recipes_are_refused():
    with pytest.raises(ValueError, match="ZeRO stage 4"):
        deep_recipe(4)
    with pytest.raises(ValueError, match="tran sharding"):
        tran_recipe("zero", 1)
    with pytest.raises(ValueError, match="transformer_impl"):
        megatron_recipe("mega", transformer_impl="apex")
    with pytest.raises(ValueError, match="no memory recipe"):
        recipe_for("jax", _cfg(dp=1))


def _cfg(dp: int, zero_stage: int = 1):
    from utils.config.model import Config

    return Config(dp=dp, ga=8, gpus_per_node=dp, zero_stage=zero_stage)


def test_verdict_refuses_forces_and_warns():
    from utils.measure.memory import verdict

    full = get_shape("llama")
    too_big = estimate(full, layout(dp=1, mbs=1, sl=2048, ga=8), tran_recipe("fsdp2", 1), H100)
    refused = verdict(too_big)
    assert refused.refusal == too_big.line() and "> 79.2 GiB" in refused.refusal and "\n" not in refused.refusal
    forced = verdict(too_big, force=True)
    assert forced.refusal is None and forced.warnings[0].startswith("--force: estimated")
    assert verdict(estimate(full, NODE, tran_recipe("fsdp2", 8), H100)).warnings == ()
    tight = verdict(estimate(full, NODE, megatron_recipe("mega", transformer_impl="local"), H100))
    assert tight.refusal is None and "within 10%" in tight.warnings[0]
    unknown = verdict(estimate(full, NODE, tran_recipe("fsdp2", 8), device_memory("nvd", "Unknown GPU")))
    assert unknown.refusal is None and unknown.warnings[0].startswith("memory check not done")


def test_nvd_reads_the_gpu_from_nvidia_smi_without_torch(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771, 570.86'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    seen = device_memory("nvd")
    assert (seen.device_name, seen.memory_gib, seen.basis) == ("NVIDIA H200", 140.4, "nvidia-smi memory.total of GPU 0")


def test_cpu_has_nothing_to_fit_and_says_so_in_the_record():
    from utils.measure.memory import verdict

    est = estimate(get_shape("llama", "tiny"), layout(), tran_recipe("fsdp2", 1), device_memory("cpu"))
    assert verdict(est).warnings == () and est.record().reason == "platform cpu: no GPU memory to check against"


def test_the_host_memory_is_memtotal_or_a_lower_cgroup_limit(tmp_path):
    from utils.machine.hardware import host_memory_gib

    meminfo, limit = tmp_path / "meminfo", tmp_path / "memory.max"
    meminfo.write_text("MemTotal:       24641536 kB\nMemFree:        1000 kB\n")
    assert host_memory_gib(meminfo, limit) == pytest.approx(23.5, abs=0.01)  # no cgroup file
    limit.write_text("max\n")
    assert host_memory_gib(meminfo, limit) == pytest.approx(23.5, abs=0.01)
    limit.write_text(f"{8 * 1024**3}\n")  # docker --memory 8g
    assert host_memory_gib(meminfo, limit) == 8.0
    assert host_memory_gib(tmp_path / "missing", tmp_path / "missing") is None


def test_cpu_holds_all_its_processes_against_the_hosts_memory(monkeypatch):
    from utils.measure.memory import verdict

    job = estimate(get_shape("llama", "tiny"), layout(dp=4, gpus_per_node=4), tran_recipe("fsdp2", 4),
                   device_memory("cpu"))
    need = 4 * job.peak_gib
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: need * 0.99)
    refused = verdict(job)
    assert refused.refusal == (f"estimated {need:.1f} GiB for 4 process(es) > {need * 0.99:.1f} GiB of host memory "
                               f"({job.what()})")
    assert verdict(job, force=True) == Verdict(None, (f"--force: {refused.refusal}; launched anyway",), forced=True)
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: need * 1.01)
    assert verdict(job) == Verdict(None)
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: None)  # unreadable: the record's reason stays
    assert verdict(job) == Verdict(None) and job.record().reason == "platform cpu: no GPU memory to check against"


def test_the_launchers_check_is_one_call_with_its_note_and_record():
    """memory_check(): the recipe given (a plugin's) or the framework's own, sized on the platform's GPU, judged."""
    from utils.measure.memory import memory_check

    full, cfg = get_shape("llama"), layout(dp=1, mbs=1, sl=2048, ga=8)
    refused = memory_check("tran", full, cfg, "nvd")
    assert refused.estimate == estimate(full, cfg, recipe_for("tran", cfg), device_memory("nvd"))
    assert refused.verdict.refusal == refused.estimate.line() and not refused.record.forced
    line = refused.estimate.line()
    assert refused.dry_run_note() == f"memory: {line} (a real run refuses it; --force runs it anyway)"
    forced = memory_check("tran", full, cfg, "nvd", force=True)
    assert forced.verdict.refusal is None and forced.record.forced and forced.record.fits is False
    assert forced.dry_run_note() == f"memory: --force: {forced.estimate.line()}; launched anyway"
    ddp = tran_recipe("ddp", world_size=1)
    fits = memory_check("tran", get_shape("llama", "tiny"), cfg, "nvd", recipe=ddp)
    assert fits.estimate.sharding == ddp.sharding and fits.verdict == Verdict(None)
    assert fits.dry_run_note() == f"memory: {fits.estimate.line()}"


def test_the_cli_says_what_the_launcher_says_on_cpu(monkeypatch, capsys):
    """``python -m utils.measure.memory --platform cpu`` answers as the launch would: over the host, exit 1."""
    from utils.measure.memory import main

    monkeypatch.delenv("TPRIMAT_CONFIG", raising=False)  # the repository's config.env
    monkeypatch.setenv("MODEL_SIZE", "tiny")
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: 0.001)
    assert main(["--platform", "cpu", "--framework", "tran"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "not checked: platform cpu" in out[0] and out[1].startswith("  refused: estimated ")
    assert out[1].endswith("GiB of host memory (tran, FSDP2, Llama 3.1 8B (tiny), 0.03 B params)")
    monkeypatch.setattr("utils.measure.memory.host_memory_gib", lambda: None)
    assert main(["--platform", "cpu", "--framework", "tran"]) == 0
