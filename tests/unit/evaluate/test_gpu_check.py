"""The GPU check's table (evaluate/gpu_check/check.py, cli.py) from results and a Megatron log.

FIXTURES BUILT FROM REPORTED FIGURES (tests/fixtures/gpu_check/README.md): the tran/deep results and
the mega log carry the tokens/s, peak memory, power and first two losses issue 25 reports for the
2026-11-24 H100 runs on the 8-layer Llama 3.1 8B proxy; the prescreen comes from a fake device at the
reported 798 TFLOP/s. The MFU, energy and gap figures the tests expect are what tprimat's owners
compute from those inputs, and they reproduce the reported MFUs (38.4%, 40.4%, 28.6%).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evaluate.gpu_check import check as gc
from evaluate.gpu_check.cli import main as gpu_check_main
from evaluate.gpu_check.model import GpuCheck, Row
from tests.helpers.devices import h100
from tests.helpers.evaluate import fake_dataset, gpu_info, workload_config
from tests.helpers.paths import FIXTURES
from train.logs.assemble import build_result
from utils.dataset.fingerprint import fingerprint
from utils.files.generated import output_targets
from utils.machine import prescreen as ps
from utils.machine.device_facts import Fact
from utils.measure.power import DeviceEnergy, power_metrics
from utils.result.file import finalize_result, new_result, result_path, write_result
from utils.result.step_log import record_steps
from utils.schema.measures import Source
from utils.schema.run import EffectiveSettings
from utils.spec.models import get_shape

FIXTURES = FIXTURES / "gpu_check"
MEGA_LOG = FIXTURES / "megatron_local_h100_proxy_llama.log"
# The reported figures (issue 25): tokens/s, peak GB, watts, first two losses.
REPORTED = {"tran": (26358.0, 60.3, 682.0, (12.593, 12.603)), "deep": (27731.0, 58.3, 672.0, (12.593, 12.603))}
CHECKED = ("mega", "tran", "deep")  # what ran on 2026-11-24: NeMo was not installed there
PROXY_WORKLOAD = {"MBS": "2", "DP": "1", "GA": "4", "GPUS_PER_NODE": "1", "TRAIN_ITERS": "30", "WARMUP_STEPS": "5",
                  "MEASURE_SKIP_STEPS": "3"}


def proxy_shape():
    """Llama 3.1 8B's width with 8 of its 32 layers (what MODEL_LAYERS=8 runs)."""
    return dataclasses.replace(get_shape("llama", "full"), num_layers=8)


def _common(root: Path):
    cfg = workload_config(**PROXY_WORKLOAD)
    shape = proxy_shape()
    prefix, tokenizer = fake_dataset(root / "data-root", "llama")
    return cfg, shape, fingerprint(cfg, shape, prefix, tokenizer)


def write_reference_result(out: Path, framework: str, first_losses: tuple[float, float] | None = None) -> Path:
    """A tran/deep result from the reported figures, through the result API the trainers use."""
    cfg, shape, fp = _common(out.parent)
    tokens_per_s, peak_gb, watts, reported_losses = REPORTED[framework]
    losses = list(first_losses or reported_losses) + [12.5 - 0.08 * i for i in range(cfg.train_iters - 2)]  # made up
    step = cfg.tokens_per_step / tokens_per_s
    arrays = {"step_times": [3 * step] + [step] * (cfg.train_iters - 1), "loss_values": losses,
              "learning_rates": [3e-4] * cfg.train_iters, "memory_allocated_gb": [peak_gb] * cfg.train_iters}
    result = new_result(cfg, platform="nvd", framework=framework, model="llama", shape=shape,
                        gpu_info=gpu_info("nvd", 1), source=Source(kind="callback"), fingerprint=fp)
    record_steps(result, arrays, skip_steps=cfg.skip_steps, shape=shape, peak_allocated_gb=peak_gb)
    measured = cfg.train_iters - cfg.skip_steps
    duration = step * measured
    result.power_metrics = power_metrics(
        [DeviceEnergy("fixture counter", 2, duration, watts * duration, watts, source="energy_counter")],
        gpus_total=1, tokens=measured * cfg.tokens_per_step)
    finalize_result(result, "ok", None)
    return write_result(result_path(out, "nvd", framework, "llama"), result)


def write_mega_result(out: Path, log: Path = MEGA_LOG, returncode: int = 0) -> Path:
    """mega's result from the Megatron log, by the producer the mega launcher uses."""
    cfg, shape, fp = _common(out.parent)
    result = build_result(cfg, log_path=log, platform="nvd", framework="mega", model="llama", returncode=returncode,
                          shape=shape, gpu_info=gpu_info("nvd", 1), fingerprint=fp)
    # what the preflight records for MEGATRON_IMPL=local, as that run had it (the log's arguments say local)
    result.effective_settings = EffectiveSettings(settings={"transformer_impl": "local"}, resolved_by="fixture")
    return write_result(result_path(out, "nvd", "mega", "llama"), result)


def write_prescreen(path: Path, peak: float = 798.0) -> Path:
    record = ps.prescreen("nvd", h100(peak=peak), {"model": Fact(value="NVIDIA H100 80GB HBM3"),
                                                   "ecc_enabled": Fact(reason="fixture: not read")})
    path.write_text(record.model_dump_json())
    return path


@pytest.fixture
def check_dir(tmp_path: Path) -> Path:
    out = tmp_path / "gpu_check"
    out.mkdir()
    write_mega_result(out)
    for framework in ("tran", "deep"):
        write_reference_result(out, framework)
    write_prescreen(out / "prescreen.json")
    return out


def rows_of(check: GpuCheck) -> dict[str, Row]:
    return {row.framework: row for row in check.rows}


def test_table_from_the_reported_figures(check_dir):
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "prescreen.json", CHECKED)
    rows = rows_of(check)
    assert check.workload == "Llama 3.1 8B [8 of 32 layers]"
    assert rows["tran"].tokens_per_second == pytest.approx(26358)
    assert rows["deep"].tokens_per_second == pytest.approx(27731)
    assert rows["mega"].tokens_per_second == pytest.approx(19645, rel=1e-4)  # 834.0 ms as Megatron prints it
    # tprimat's FLOPs reproduce the reported MFUs against the 989.4 TFLOP/s datasheet ...
    for framework, reported in (("tran", 0.384), ("deep", 0.404), ("mega", 0.286)):
        assert rows[framework].mfu_datasheet == pytest.approx(reported, abs=5e-4)
    # ... and against the measured 798 TFLOP/s peak they are 989.4/798 times higher.
    for row in rows.values():
        assert row.mfu_measured_peak == pytest.approx(row.mfu_datasheet * 989.4 / 798.0)
    assert rows["mega"].implementation == "local" and rows["tran"].implementation is None
    assert rows["mega"].peak_memory_gb == pytest.approx(63.1)
    assert rows["tran"].peak_memory_gb == 60.3 and rows["deep"].peak_memory_gb == 58.3
    # energy: tokens per kWh = tokens/s * 3.6e6 J/kWh / W
    assert rows["tran"].tokens_per_kwh == pytest.approx(26358 * 3.6e6 / 682)
    assert rows["deep"].avg_power_w_per_gpu == pytest.approx(672)
    assert rows["mega"].energy_kwh is None and "energy" in rows["mega"].missing
    assert rows["mega"].first_losses == [12.594, 12.586]
    assert check.loss_reference == "tran"
    assert rows["mega"].loss_gap == pytest.approx(abs(12.586 - 12.603) / 12.603)
    assert rows["deep"].loss_gap == 0.0
    # tprimat read mega's step times from Megatron's lines; Megatron's own TFLOP/s checks them against our FLOPs.
    assert rows["mega"].step_time_s == pytest.approx(0.834)
    assert rows["mega"].framework_tflops_per_gpu == pytest.approx(283.4)
    assert rows["mega"].framework_gap == pytest.approx(0.0, abs=2e-4) and not rows["mega"].framework_flagged
    assert rows["mega"].framework_gap_metric == "tflops_per_gpu (full)"
    assert rows["tran"].framework_step_time_s is None and "in-process" in rows["tran"].missing["framework's own"]
    # no pre-launch estimate in these results: null with the reason
    assert all(row.memory_estimate_gb is None and "estimate" in row.missing for row in rows.values())
    assert check.verdict == "ready", check.verdict_line


def test_every_nvd_framework_is_expected_by_default(check_dir):
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "prescreen.json")
    assert [row.framework for row in check.rows] == ["mega", "nemo", "tran", "deep"]
    assert check.verdict == "broken"
    assert check.verdict_line == "broken: nemo: missing: no result: the job did not start or wrote none"


def test_slow_node_is_degraded_with_the_gemm_line(check_dir):
    write_prescreen(check_dir / "prescreen.json", peak=700.0)
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "prescreen.json", CHECKED)
    assert check.verdict == "degraded"
    assert check.verdict_line.startswith("degraded: GEMM peak 700 TFLOP/s is 71% of the datasheet's 989")


def test_losses_more_than_2_percent_apart_are_degraded(check_dir):
    write_reference_result(check_dir, "deep", first_losses=(12.593, 12.95))
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "prescreen.json", CHECKED)
    assert check.verdict == "degraded"
    assert "first losses: deep 12.593, 12.950 are 2.8% from tran's" in check.verdict_line
    assert "mega" not in check.verdict_line


def test_a_framework_that_failed_makes_it_broken_with_the_reason(check_dir, tmp_path):
    log = tmp_path / "oom.log"
    lines = MEGA_LOG.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "iteration        3/" in line)
    log.write_text("\n".join([*lines[:cut], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
                   + "\n")
    write_mega_result(check_dir, log, returncode=1)
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "prescreen.json", CHECKED)
    assert check.verdict == "broken"
    assert check.verdict_line.startswith("broken: mega: failed: process exited with code 1")
    assert "out of memory" in check.verdict_line.lower()
    assert rows_of(check)["mega"].loss_gap is None  # a failed run is not compared


def test_no_prescreen_is_degraded_and_mfu_against_the_measured_peak_is_null(check_dir):
    check = gc.build_check(check_dir, "nvd", "llama", check_dir / "absent.json", CHECKED)
    assert check.verdict == "degraded" and "no prescreen: " in check.verdict_line
    assert all(row.mfu_measured_peak is None and "no measured GEMM peak" in row.missing["MFU measured peak"]
               for row in check.rows)


def test_main_writes_the_table_and_exits_by_the_verdict(check_dir, tmp_path):
    printed: list[str] = []
    out = tmp_path / "output"
    argv = ["--results-dir", str(check_dir), "--platform", "nvd", "--prescreen", str(check_dir / "prescreen.json"),
            "--out-dir", str(out), "--frameworks", *CHECKED]
    assert gpu_check_main(argv, say=printed.append) == 0
    markdown = (out / "gpu_check.md").read_text()
    assert "| framework | status | tokens/s | MFU datasheet | MFU measured peak |" in markdown
    assert "| tran | ok | 26,358 | 38.4% | 47.7% | 60.3 |" in markdown
    assert "| mega [local] | ok | 19,645 | 28.6% | 35.5% | 63.1 |" in markdown
    assert markdown.rstrip().splitlines()[-1].startswith("**Verdict: ready")
    record = GpuCheck.model_validate(json.loads((out / "gpu_check.json").read_text()))
    assert record.verdict == "ready" and record.prescreen.gemm.measured_peak_tflops == pytest.approx(798.0)
    console = printed[0].splitlines()
    assert console[-1].startswith("verdict: ready")
    assert any(line.startswith("GEMM bf16 peak: 798.0 TFLOP/s measured (n=8192) against 989.4 datasheet = 80.7%")
               for line in console)
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temp file left behind
    assert gpu_check_main(argv[:-4], say=printed.append) == 1  # all nvd frameworks: nemo missing


def test_bad_input_is_exit_2(tmp_path, capsys):
    assert gpu_check_main(["--results-dir", str(tmp_path / "nope"), "--platform", "nvd",
                           "--out-dir", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert gpu_check_main(["--results-dir", str(tmp_path), "--platform", "nvd", "--out-dir", str(tmp_path),
                    "--frameworks", "prim"], say=lambda _: None) == 1  # prim on nvd is nemo: mapped, then missing
    with pytest.raises(SystemExit) as exit_info:
        gpu_check_main(["--results-dir", str(tmp_path), "--platform", "tpu", "--out-dir", str(tmp_path)])
    assert exit_info.value.code == 2


def test_purge_knows_what_the_check_writes(tmp_path):
    (tmp_path / "gpu_check" / "20261124T140000Z").mkdir(parents=True)
    for name in ("gpu_check.md", "gpu_check.json", "notes.md"):
        (tmp_path / name).write_text("x")
    targets = {(t.path.name, t.tree) for t in output_targets(tmp_path)}
    assert targets == {("gpu_check.md", False), ("gpu_check.json", False), ("gpu_check", True)}
