"""Real tiny ``tran`` runs on cpu through the real launcher (``python -m train.launch``).

Data comes from the session's ``sample_data_dir`` (built once by ``shell/data.sh``),
so these runs read the same files, through the same code, as a real benchmark.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import PYTHON, run_module
from utils.result.file import read_result
from utils.schema.model import Result

LAUNCH = ("train.launch.launcher", "--platform", "cpu", "--framework", "tran")


def launch(env: dict[str, str], model: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc = run_module(*LAUNCH, "--model", model, *extra, env=env, timeout=300)
    return proc, Path(env["OUTPUT_DIR"]) / f"train_cpu_tran_{model}.json"


def assert_learned(result: Result) -> None:
    losses = result.loss_values
    assert all(isinstance(v, float) for v in losses), losses
    third = len(losses) // 3
    assert statistics.fmean(losses[-third:]) < statistics.fmean(losses[:third]), losses


@pytest.mark.slow
def test_llama_tiny_run_is_ok_and_learns(tiny_env: Callable[..., dict[str, str]]) -> None:
    # oneDNN capped below its bf16 instructions: a CPU without native bf16 on any machine, so the job runs fp32
    # (CPU_PRECISION=auto, utils/machine/cpu_precision.py), says so at launch and records why.
    env = tiny_env(ONEDNN_MAX_CPU_ISA="AVX2", CPU_PRECISION="auto", PRECISION="bf16")
    proc, path = launch(env, "llama")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "tprimat: cpu precision: fp32 (PRECISION=bf16, CPU_PRECISION=auto: no native bf16" in proc.stderr
    result = read_result(path)  # validates against the schema
    assert result.status == "ok" and result.error is None
    assert (result.framework, result.model, result.platform) == ("tran", "llama", "cpu")
    assert_learned(result)
    # 12 steps, warm-up max(2, 10%) = 2 excluded from the statistics but kept in the arrays.
    assert len(result.step_times) == len(result.loss_values) == len(result.learning_rates) == 12
    perf = result.performance_metrics
    assert (perf.measured_steps, perf.skipped_steps) == (10, 2)
    assert perf.median_step_time_seconds == pytest.approx(statistics.median(result.step_times[2:]))
    assert perf.total_time_seconds == pytest.approx(math.fsum(result.step_times))
    assert perf.tokens_per_step == 2 * 2 * 64  # MBS * GA * DP(1) * SL
    assert perf.tokens_per_second == pytest.approx(256 / perf.median_step_time_seconds)
    # The rate each step applied, as Megatron applies it: step k uses the rate after k-1 steps
    # (warm-up from 0 over 2 steps, then cosine towards MIN_LR at step 12).
    lrs = result.learning_rates
    assert lrs[:3] == pytest.approx([0.0, 1.5e-3, 3e-3])
    assert lrs[-1] == pytest.approx(3e-4 + 2.7e-3 * 0.5 * (1 + math.cos(math.pi * 9 / 10)))
    config = result.training_config
    assert (config.precision_effective, config.workload.PRECISION, config.precision_requested) == ("fp32", "fp32",
                                                                                                   "bf16")
    assert "ONEDNN_MAX_CPU_ISA=AVX2 caps oneDNN below AVX512_CORE_BF16" in config.precision_reason
    assert config.precision_detail.startswith("fp32 compute weights (FSDP2 MixedPrecisionPolicy, no autocast)")
    assert result.effective_settings.settings["precision"] == "fp32"
    assert result.effective_settings.settings["cpu_precision"] == "auto"
    assert result.effective_settings.settings["precision_reason"] == config.precision_reason
    assert config.world_size_started == 1
    shape = result.model_shape
    assert shape.size == "tiny" and shape.vocab_size > 2000  # the sample tokenizer's vocabulary
    assert result.fingerprint.data.hash.startswith("sha256:")
    assert result.fingerprint.tokenizer.hash.startswith("sha256:")
    assert result.power_metrics.energy_j is None and "cpu" in result.power_metrics.reason
    assert result.power_metrics.energy_source == "none"
    assert result.source.kind == "callback"
    assert result.environment.launcher_set["OMP_NUM_THREADS"].isdigit()
    assert "step 12/12" in Path(result.source.log_path).read_text()
    # the launcher's preflight record (tran is the reference: tprimat resolves its own settings)
    assert result.effective_settings.resolved_by.startswith("tprimat itself")
    assert result.effective_settings.settings["global_batch_size"] == 4
    assert result.effective_settings.settings["lr"] == pytest.approx(3e-3)
    assert result.framework_versions.torch == importlib.metadata.version("torch")
    assert "megatron_lm_commit" in result.framework_versions.unknown


@pytest.mark.slow
def test_qwen_two_processes_record_world_size_two(tiny_env: Callable[..., dict[str, str]]) -> None:
    env = tiny_env(DP="2", GPUS_PER_NODE="2", GA="1", TRAIN_ITERS="10")
    proc, path = launch(env, "qwen")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(path)
    assert result.status == "ok"
    config = result.training_config
    assert (config.workload.WORLD_SIZE, config.num_gpus, config.world_size_started, config.workload.DP) == (
        2, 2, 2, 2)
    assert config.global_batch_size == 4  # MBS 2 * DP 2 * GA 1
    assert result.model_shape.hf_architecture == "Qwen2ForCausalLM" and result.model_shape.qkv_bias
    assert result.environment.launcher_set["OMP_NUM_THREADS"] == str(max(1, _cores() // 2))
    assert len(result.step_times) == 10
    assert_learned(result)


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


@pytest.mark.slow
@pytest.mark.parametrize(("model", "processes"), [("llama", "1"), ("qwen", "2")])
def test_sigterm_mid_run_leaves_an_incomplete_result(tiny_env: Callable[..., dict[str, str]], tmp_path: Path,
                                                     model: str, processes: str) -> None:
    # With 2 processes every rank must stop after the same step (agreed through the loss all-reduce),
    # otherwise rank 0 would hang or fail in a collective instead of writing "incomplete".
    env = tiny_env(TRAIN_ITERS="2000", MEASURE_SKIP_STEPS="1", DP=processes, GPUS_PER_NODE=processes, GA="1")
    log = tmp_path / "launcher.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([PYTHON, "-m", *LAUNCH, "--model", model], env=env, cwd=REPO, stdout=sink,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while "step 4/2000" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, log.read_text()[-3000:]
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert code == 128 + signal.SIGTERM, text[-3000:]  # stopped by a signal: 128 + its number, as a shell does
    result = read_result(Path(env["OUTPUT_DIR"]) / f"train_cpu_tran_{model}.json")
    assert result.status == "incomplete", result.error
    assert result.training_config.world_size_started == int(processes)
    assert "SIGTERM" in result.error
    done = len(result.step_times)
    assert 4 <= done < 2000 and f"{done} of 2000 steps done" in result.error
    assert len(result.loss_values) == done and all(isinstance(v, float) for v in result.loss_values)
    assert result.performance_metrics.measured_steps == done - 1
    assert result.source.kind == "callback"  # written by rank 0 itself, not the launcher's fallback


def test_dry_run_prints_the_torchrun_command(tmp_path: Path) -> None:
    from tests.helpers.workload import tiny_environ

    env = tiny_environ(tmp_path / "data", tmp_path / "out", DP="2", GPUS_PER_NODE="2")
    proc = run_module(*LAUNCH, "--model", "qwen", "--dry-run", "--run-index", "3", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    command = proc.stdout.splitlines()[1]
    for part in ("-m torch.distributed.run", "--nproc-per-node=2", "--nnodes=1", "-m train.tran.worker",
                 "--model qwen", "--run-index 3", f"--result {tmp_path / 'out' / 'train_cpu_tran_qwen_r3.json'}"):
        assert part in command, command
    assert "OMP_NUM_THREADS=" in proc.stdout
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


@pytest.mark.parametrize(("override", "message"), [
    ({"FP8": "true"}, "FP8=true is not supported by tran"),
    ({"TP": "2", "DP": "1", "GPUS_PER_NODE": "2", "MODELS": "llama"}, "tran is data-parallel only"),
])
def test_unsupported_settings_fail_clearly(tmp_path: Path, override: dict[str, str], message: str) -> None:
    from tests.helpers.workload import tiny_environ

    env = tiny_environ(tmp_path / "data", tmp_path / "out", **override)
    proc = run_module(*LAUNCH, "--model", "llama", env=env, timeout=120)
    assert proc.returncode == 1
    assert message in proc.stderr
    result = json.loads((tmp_path / "out" / "train_cpu_tran_llama.json").read_text())
    assert result["status"] == "failed" and message in result["error"]


def test_world_size_mismatch_is_refused(tmp_path: Path) -> None:
    from tests.helpers.workload import tiny_environ

    # DP=2 but started as a single process (no torchrun): the worker must refuse, naming both numbers.
    env = tiny_environ(tmp_path / "data", tmp_path / "out", DP="2", GPUS_PER_NODE="2")
    proc = run_module("train.tran.worker", "--model", "llama", "--platform", "cpu",
                      "--result", str(tmp_path / "r.json"), env=env, timeout=120)
    assert proc.returncode == 2
    assert "torchrun started 1 process(es) but TP*PP*CP*DP = 2" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    # in this process: tests/house/test_entry_points.py runs `python -m train.tran.worker --help` as its own process
    from train.tran.worker import main

    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0 and "--model" in out and "--result" in out
