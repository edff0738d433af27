"""Log extraction (train/logs/): every fixture format gives a valid result with the right numbers and status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.megatron import FIXTURE_WORKLOAD, FIXTURES, make_config
from train.logs import build_result
from train.logs.scan import scan_file, scan_lines
from utils.config.model import REPO_ROOT
from utils.result.file import read_result, write_result
from utils.schema.hardware import GpuInfo
from utils.schema.model import Result
from utils.spec.models import flops_per_token, get_shape

# Per-iteration times (ms) and losses every fixture was written with (tests/fixtures/logs/README.md).
TIMES_MS = [5210.4, 2104.7, 1991.2, 1985.0, 1979.3, 1988.8, 1983.1, 1986.4, 1981.9, 1984.6]
LOSSES = [11.93, 11.41, 10.87, 10.02, 9.31, 8.77, 8.32, 7.95, 7.70, 7.52]
MI300X = GpuInfo(device_name="AMD Instinct MI300X", device_count=8, total_memory_gb=191.98, software_stack="rocm",
                 software_version="6.4", pytorch_version="2.7", driver_version=None,
                 peak_tflops={"bf16": 1307.4, "fp8": 2614.9})


def _extract(tmp_path: Path, name: str, model: str, returncode: int | None = 0, framework: str = "mega",
             **overrides: str) -> Result:
    cfg = make_config(tmp_path, **overrides)
    result = build_result(cfg, log_path=FIXTURES / name, platform="amd", framework=framework, model=model,
                          returncode=returncode, gpu_info=MI300X)
    return read_result(write_result(tmp_path / "result.json", result))  # validated as a whole, both ways


def _median_after_skip(times_ms: list[float], skip: int) -> float:
    data = sorted(t / 1000 for t in times_ms[skip:])
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


@pytest.mark.parametrize("name, model, log_format", [
    ("megatron_core012_llama.log", "llama", "megatron-lm (timestamped)"),
    ("megatron_new_energy_qwen.log", "qwen", "megatron-lm (timestamped)"),
    ("megatron_old_llama.log", "llama", "megatron-lm (no timestamp)"),
    ("primus_legacy_llama.log", "llama", "primus (legacy inst/avg pairs)"),
    ("primus_new_qwen.log", "qwen", "primus (compute/tokens per GPU with averages)"),
])
def test_complete_logs_give_ok_results(tmp_path: Path, name: str, model: str, log_format: str) -> None:
    result = _extract(tmp_path, name, model)
    assert result.status == "ok" and result.error is None
    assert result.source.format == log_format and result.source.kind == "log"
    assert result.step_times == pytest.approx([t / 1000 for t in TIMES_MS])
    assert result.loss_values == pytest.approx(LOSSES)
    assert result.learning_rates[1] == pytest.approx(3e-4, rel=1e-3)  # peak after 2 warm-up steps
    perf = result.performance_metrics
    skip = perf.skipped_steps
    assert skip == 2  # max(2, 10% of 10)
    median = _median_after_skip(TIMES_MS, skip)
    assert perf.median_step_time_seconds == pytest.approx(median)
    assert perf.tokens_per_second == pytest.approx(64 * 2048 / median)
    assert perf.total_time_seconds == pytest.approx(sum(TIMES_MS) / 1000)
    flops = flops_per_token(get_shape(model), 2048).full
    assert perf.mfu.full == pytest.approx(64 * 2048 / median / 8 * flops / 1307.4e12)


def test_megatron_memory_report_in_mib(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_core012_llama.log", "llama")
    memory = result.memory_metrics
    assert memory.peak_allocated_gb == pytest.approx(52224.75 / 1024)
    assert memory.peak_reserved_gb == pytest.approx(56100.0 / 1024)
    assert result.memory_allocated_gb[:3] == pytest.approx([26734.12353515625 / 1024, 27001.5 / 1024, None])


def test_gb_memory_variant_energy_and_rank_tags(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_new_energy_qwen.log", "qwen")
    assert result.memory_metrics.peak_allocated_gb == 47.25
    assert result.memory_allocated_gb[1] == 24.5
    power = result.power_metrics
    measured = range(3, 11)
    assert power.energy_source == "log"
    assert power.avg_power_w_per_gpu == pytest.approx(sum(655.0 + i for i in measured) / 8)
    energy_per_gpu = sum(round((655.0 + i) * TIMES_MS[i - 1] / 1000, 1) for i in measured)
    assert power.energy_j == pytest.approx(energy_per_gpu * 8)
    assert result.source.first_timestamp == "2025-09-01 12:00:02.123457"


def test_primus_legacy_pairs_use_instantaneous_values(tmp_path: Path) -> None:
    result = _extract(tmp_path, "primus_legacy_llama.log", "llama", framework="prim")
    reported = result.performance_metrics.framework_reported
    # the framework's running average over iterations 3..10 is kept separately from the instantaneous series
    assert reported.running_average["step_time_seconds"] == pytest.approx(round(sum(TIMES_MS[2:]) / 8, 1) / 1000)
    assert reported.tokens_per_second_per_gpu == pytest.approx(64 * 2048 / 8 / _median_after_skip(TIMES_MS, 2),
                                                               rel=1e-4)
    memory = result.memory_metrics
    assert memory.device_used_peak_gb == 72.75 and memory.total_memory_gb == 191.98
    assert not reported.flagged


def test_disagreement_is_flagged_when_framework_tflops_are_off(tmp_path: Path) -> None:
    result = _extract(tmp_path, "primus_new_qwen.log", "qwen", framework="prim")
    reported = result.performance_metrics.framework_reported
    by_metric = {d.metric.split(" ")[0]: d for d in reported.disagreements}
    assert by_metric["tflops_per_gpu"].flagged
    assert by_metric["tflops_per_gpu"].relative_gap == pytest.approx(0.2, abs=0.002)
    assert not by_metric["tokens_per_second_per_gpu"].flagged
    assert reported.flagged and any("disagree by more than 5%" in w for w in result.warnings)
    assert any("duplicate iteration line" in w for w in result.warnings)  # lines forwarded to rank 0


def test_agreement_is_not_flagged(tmp_path: Path) -> None:
    reported = _extract(tmp_path, "megatron_core012_llama.log", "llama").performance_metrics.framework_reported
    assert reported.disagreements and not reported.flagged
    assert reported.disagreements[0].relative_gap < 0.01


def test_oom_traceback_is_failed(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_oom_llama.log", "llama", returncode=1)
    assert result.status == "failed"
    assert "out of memory" in result.error and result.error.endswith("(3 of 10 steps done)")
    assert len(result.step_times) == 3
    assert "out of memory" in {p.kind for p in result.source.problems}


def test_oom_is_failed_even_with_exit_code_zero(tmp_path: Path) -> None:
    assert _extract(tmp_path, "megatron_oom_llama.log", "llama", returncode=0).status == "failed"


def test_truncated_log_is_incomplete(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_truncated_llama.log", "llama", returncode=0)
    assert result.status == "incomplete" and result.error == "only 6 of 10 steps ran"
    assert len(result.step_times) == 6
    assert any("truncated" in w for w in result.warnings)


def test_nan_iteration_is_failed(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_nan_llama.log", "llama")
    assert result.status == "failed" and "NaN loss at iteration(s) 5" in result.error
    assert result.loss_values[4] is None and result.step_times[4] is not None


def test_rccl_error_is_failed(tmp_path: Path) -> None:
    result = _extract(tmp_path, "primus_rccl_error_llama.log", "llama", returncode=1, framework="prim")
    assert result.status == "failed" and "NCCL/RCCL error" in result.error
    assert result.performance_metrics.mfu is None  # both steps are warm-up: nothing measured


def test_interrupted_run_is_incomplete(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_truncated_llama.log", "llama", returncode=-15)
    assert result.status == "incomplete" and "interrupted" in result.error
    assert _extract(tmp_path, "megatron_truncated_llama.log", "llama", returncode=143).status == "incomplete"


def test_workload_mismatch_is_failed(tmp_path: Path) -> None:
    result = _extract(tmp_path, "megatron_core012_llama.log", "llama", TRAIN_ITERS="20")
    assert result.status == "failed" and "TRAIN_ITERS=20" in result.error
    result = _extract(tmp_path, "megatron_core012_llama.log", "llama", MBS="2")
    assert result.status == "failed" and "global batch size [64] is not GBS=128" in result.error


def test_missing_log_is_a_failed_result(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    result = build_result(cfg, log_path=tmp_path / "absent.log", platform="nvd", framework="mega",
                          model="llama", returncode=1)
    assert read_result(write_result(tmp_path / "r.json", result)).status == "failed"
    assert any("cannot read log" in w for w in result.warnings)


def test_parser_ignores_ansi_and_prefixes() -> None:
    line = ("[default3]:\x1b[32m[20251126 10:00:00]\x1b[0m[rank-7/8][INFO ] [----trainer.py:2470] :  iteration"
            "        4/      10 | consumed samples:          256 | elapsed time per iteration (ms): 1985.0/1990.1 |"
            " learning rate: 2.700000E-04 | global batch size:    64 | lm loss: 1.002000E+01 |")
    scan = scan_lines([line + "\n"])
    (record,) = scan.iterations
    assert (record.iteration, record.step_time_s, record.framework_avg_step_time_s) == (4, 1.985, 1.9901)
    assert record.loss == pytest.approx(10.02) and record.learning_rate == pytest.approx(2.7e-4)
    assert not scan.warnings


def test_cli_log_analysis_mode(tmp_path: Path) -> None:
    output = tmp_path / "result.json"
    env = {**{k: v for k, v in os.environ.items() if k != "HF_TOKEN"}, **FIXTURE_WORKLOAD,
           "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "DATA_DIR": str(tmp_path / "data"),
           "OUTPUT_DIR": str(tmp_path / "out")}
    command = [sys.executable, "-m", "evaluate.extract", str(FIXTURES / "primus_legacy_llama.log"), "--from-config",
               "--platform", "amd", "--framework", "prim", "--model", "llama", "--gpu-name", "AMD Instinct MI300X"]
    proc = subprocess.run([*command, "--output", str(output)], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = read_result(output)
    assert result.status == "ok" and result.gpu_info.peak_tflops.bf16 == 1307.4
    assert result.performance_metrics.mfu.full > 0.2
    assert result.training_config.workload.TRAIN_ITERS == 10 and result.environment.captured_by
    failed = subprocess.run([*command[:3], str(FIXTURES / "megatron_oom_llama.log"), *command[4:],
                             "--returncode", "1"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert failed.returncode == 1 and json.loads(failed.stdout)["status"] == "failed"
    missing = subprocess.run([*command[:3], str(tmp_path / "nope.log"), *command[4:]], cwd=REPO_ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such log file or folder" in missing.stderr


def test_the_scan_streams_a_file_and_a_progress_bar_leaves_the_iteration_line_whole(tmp_path: Path) -> None:
    """A progress bar's carriage returns end its own lines (``\\r``, ``\\r\\n`` and ``\\n`` all end one, issue 33),
    the iteration line after them is read whole; invalid UTF-8 is not an error."""
    log = tmp_path / "progress.log"
    line = (" iteration        1/      10 | consumed samples:           64 | elapsed time per iteration (ms): 5210.4 |"
            " learning rate: 1.500000E-04 | global batch size:    64 | lm loss: 1.193000E+01 |")
    log.write_bytes(b"loading 10%\rloading 100%\r" + line.encode() + b"\n\xff\xfe garbage\n")
    scan = scan_file(log)
    assert [r.iteration for r in scan.iterations] == [1] and scan.line_count == 4
    assert scan.iterations[0].step_time_s == pytest.approx(5.2104)
