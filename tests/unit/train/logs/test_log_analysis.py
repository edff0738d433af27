"""Log analysis of runs tprimat did not launch: the workload, model and statistics come from the log itself."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.fixtures.logs.generate_foreign import (
    LLAMA,
    QWEN,
    flops_per_token,
    loss,
    megatron_args,
    megatron_line,
    step_ms,
)
from tests.helpers.megatron import FIXTURE_WORKLOAD, FIXTURES
from train.launch.context import log_path_for
from train.launch.contract import LaunchPlan, RunContext
from train.launch.launcher import launch
from train.logs.analyse import AnalysisOptions, analyse_files
from train.logs.scan import LogInputError
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.dataset.paths import job_data
from utils.result.file import read_result, result_path, write_result
from utils.schema.hardware import FrameworkVersions
from utils.schema.model import Result
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape

FOREIGN = FIXTURES / "foreign"
MI300X, H100 = "AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"
PEAK = {MI300X: 1307.4, H100: 989.4}  # bf16 dense, utils/machine/hardware.py's table


def analyse(tmp_path: Path, *paths: Path, **options: object) -> Result:
    """The result of ``paths`` in log-analysis mode, validated as a whole through a file (both ways)."""
    result = analyse_files(list(paths), AnalysisOptions(**options)).result  # type: ignore[arg-type]
    return read_result(write_result(tmp_path / "result.json", result))


def median_ms(first: int, last: int) -> float:
    return statistics.median(step_ms(i) for i in range(first, last + 1))


def test_core012_gbs128_run_gives_its_own_workload_without_config(tmp_path: Path) -> None:
    """The issue's example: a GBS 128, 100-iteration run is ok, measured with ITS workload, not config.env's."""
    result = analyse(tmp_path, FOREIGN / "megatron_core012_gbs128_llama.log", gpu_name=H100)
    assert result.status == "ok" and (result.platform, result.framework, result.model) == ("nvd", "mega", "llama")
    w = result.training_config.workload
    assert (w.GBS, w.MBS, w.DP, w.GA, w.TP, w.PP, w.CP, w.WORLD_SIZE) == (128, 2, 4, 16, 2, 1, 1, 8)
    assert (w.SL, w.TRAIN_ITERS, w.LR, w.WARMUP_STEPS, w.SEED, w.LR_DECAY) == (4096, 100, 0.00015, 10, 1234, "cosine")
    assert (w.PRECISION, w.FP8, w.MODEL_SIZE) == ("bf16", False, "full")
    assert set(w.unknown) == {"DATASET", "DATA_SAMPLES"}  # everything else is stated by the log
    assert "/data/corpus_text_document" in w.unknown["DATASET"]
    perf = result.performance_metrics
    assert perf.skipped_steps == 10 and perf.measured_steps == 90  # max(2, 10% of 100)
    median = median_ms(11, 100) / 1000
    assert perf.median_step_time_seconds == pytest.approx(median)
    assert perf.tokens_per_second == pytest.approx(128 * 4096 / median)
    assert perf.mfu.full == pytest.approx(128 * 4096 / median / 8 * flops_per_token(LLAMA, 4096) / (PEAK[H100] * 1e12))
    assert not perf.framework_reported.flagged  # Megatron's own TFLOP/s agree with ours
    assert result.loss_values[0] == pytest.approx(loss(1), rel=1e-6)
    assert result.memory_metrics.peak_allocated_gb == pytest.approx(61234.25 / 1024)
    assert result.source.kind == "log" and len(result.source.files) == 1 and len(result.source.files[0].sha256) == 64
    assert result.fingerprint.data.hash is None and result.fingerprint.flop_convention
    assert any("platform nvd from" in w and "NCCL version" in w for w in result.warnings)


def test_core015_fp8_qwen_with_rank_tags_and_padded_vocabulary(tmp_path: Path) -> None:
    result = analyse(tmp_path, FOREIGN / "megatron_core015_qwen_fp8.log", gpu_name=MI300X)
    assert (result.status, result.platform, result.model) == ("ok", "amd", "qwen")
    w = result.training_config.workload
    assert (w.GBS, w.SL, w.GA, w.FP8, w.PRECISION) == (32, 8192, 4, True, "bf16")
    assert result.training_config.precision_effective == "bf16+fp8-hybrid"
    assert result.model_shape.vocab_size == QWEN["vocab"]  # the logged padded size, not the table's 152064
    assert result.performance_metrics.peak_precision == "fp8" and result.performance_metrics.peak_tflops == 2614.9
    assert not result.performance_metrics.framework_reported.flagged


def test_resumed_fragment_starts_at_its_first_iteration_and_rewarms(tmp_path: Path) -> None:
    """Iterations 122-181 of 250,000: no leading nulls, warm-up from 122, throughput measured."""
    result = analyse(tmp_path, FOREIGN / "megatron_resumed_llama.log", gpu_name=H100)
    assert result.first_step == 122 and result.step_interval == 1 and len(result.step_times) == 60
    assert None not in result.step_times
    assert result.step_times[0] == pytest.approx(step_ms(122) / 1000)
    perf = result.performance_metrics
    assert perf.skipped_steps == 6 and perf.measured_steps == 54  # 10% of the 60 logged, not of 250,000
    assert perf.tokens_per_second == pytest.approx(64 * 8192 / (median_ms(128, 181) / 1000))
    assert result.training_config.workload.TRAIN_ITERS == 250000
    assert result.status == "incomplete"
    assert result.error == "the log ends at iteration 181 of 250000 (60 of 249879 steps done)"


def test_old_format_without_arguments_needs_model_and_platform_and_says_what_is_unknown(tmp_path: Path) -> None:
    log = FOREIGN / "megatron_old_noargs.log"
    with pytest.raises(LogInputError, match="pass --model"):
        analyse_files([log], AnalysisOptions(platform="nvd"))
    with pytest.raises(LogInputError, match="pass --platform"):
        analyse_files([log], AnalysisOptions(model="llama"))
    result = analyse(tmp_path, log, model="llama", platform="nvd", gpu_name=H100)
    w = result.training_config.workload
    assert (w.GBS, w.TRAIN_ITERS, w.WORLD_SIZE, w.DP, w.TP, w.PP) == (512, 30, 16, 16, 1, 1)
    assert w.SL is None and "no arguments block" in w.unknown["SL"] and w.CP is None and "CP" in w.unknown
    perf = result.performance_metrics
    assert perf.tokens_per_second is None and perf.mfu is None and "SL" in perf.mfu_reason
    assert perf.median_step_time_seconds == pytest.approx(median_ms(4, 30) / 1000)
    assert result.source.format == "megatron-lm (no timestamp)" and result.status == "ok"
    assert any("not checked against the log" in w for w in result.warnings)


def test_primus_console_world_size_from_its_rank_prefix(tmp_path: Path) -> None:
    result = analyse(tmp_path, FOREIGN / "primus_llama_console.log", model="llama")
    assert (result.platform, result.framework, result.status) == ("amd", "prim", "ok")
    w = result.training_config.workload
    assert (w.WORLD_SIZE, w.GBS, w.TRAIN_ITERS, w.SL) == (8, 128, 50, None)
    reported = result.performance_metrics.framework_reported
    assert reported.tokens_per_second_per_gpu == pytest.approx(128 * 8192 / 8 / (median_ms(6, 50) / 1000), rel=1e-4)
    assert result.memory_metrics.device_used_peak_gb == 150.25


def test_nemo_console_is_zero_based_and_host_timed(tmp_path: Path) -> None:
    result = analyse(tmp_path, FOREIGN / "nemo_console_llama.log", model="llama")
    assert (result.platform, result.framework, result.status) == ("nvd", "nemo", "ok")
    assert result.source.format == "nemo (ProgressPrinter)"
    assert result.first_step == 1 and len(result.step_times) == 30  # "iteration 0/29" is step 1 of 30
    assert result.step_times[1] == pytest.approx(float(f"{step_ms(2) / 1000:.4}"))
    w = result.training_config.workload
    assert (w.GBS, w.TRAIN_ITERS, w.WORLD_SIZE) == (128, 30, 8)
    assert any("does not synchronise the device" in w for w in result.warnings)


def test_a_log_that_contradicts_its_arguments_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogInputError, match=r"contradicts itself.*GBS: 128 in the arguments block, 64 in the "
                                            r"iteration lines"):
        analyse_files([FOREIGN / "megatron_contradiction.log"], AnalysisOptions(platform="nvd"))


def test_model_is_recognised_and_a_wrong_model_refused(tmp_path: Path) -> None:
    with pytest.raises(LogInputError, match="--model qwen does not match the log's model"):
        analyse_files([FOREIGN / "megatron_core012_gbs128_llama.log"], AnalysisOptions(model="qwen"))
    bigger = {**LLAMA, "num_layers": 80, "hidden_size": 8192, "ffn_hidden_size": 28672, "num_attention_heads": 64}
    run = {"seq": 4096, "gbs": 128, "world": 8}
    log = tmp_path / "llama70b.log"
    log.write_text("\n".join([*megatron_args(bigger, seq=4096, mbs=2, gbs=128, tp=2, dp=4, iters=5, lr=1e-4, warm=1,
                                             world=8),
                               *(megatron_line(i, 5, bigger, **run, peak=1e-4, warm=1) for i in range(1, 6))]) + "\n")
    with pytest.raises(LogInputError, match=r"\(num_layers 80, hidden_size 8192, .*\) is not in the shape table"):
        analyse_files([log], AnalysisOptions(platform="nvd"))
    # Mistral 7B has Llama 3.1 8B's layers, widths and heads: only the vocabulary tells them apart
    def with_vocab(name: str, vocab: int) -> Path:
        log = tmp_path / f"{name}.log"
        log.write_text("\n".join([*megatron_args(LLAMA, seq=4096, mbs=2, gbs=128, tp=2, dp=4, iters=5, lr=1e-4,
                                                 warm=1, world=8),
                                   f" > padded vocab (size: {vocab}) with 0 dummy tokens (new size: {vocab})",
                                   *(megatron_line(i, 5, LLAMA, **run, peak=1e-4, warm=1) for i in range(1, 6))])
                       + "\n")
        return log

    assert analyse_files([with_vocab("mistral", 32768)], AnalysisOptions(platform="nvd")).result.model == "mistral"
    with pytest.raises(LogInputError, match="vocabulary 50304\\) is not in the shape table"):
        analyse_files([with_vocab("other", 50304)], AnalysisOptions(platform="nvd"))


def test_stride_of_a_log_that_prints_every_tenth_iteration(tmp_path: Path) -> None:
    """Megatron --log-interval 10: one entry per logged iteration, each the interval's average; a gap is null."""
    def line(i: int) -> str:
        return (f" iteration {i:8d}/{200:8d} | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): "
                f"{step_ms(i // 10):.1f} | learning rate: 1.000000E-04 | global batch size:    64 | lm loss: "
                f"{loss(i):.6E} | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    log = tmp_path / "interval.log"
    log.write_text("".join(line(i) for i in range(10, 201, 10) if i != 150))
    result = analyse(tmp_path, log, model="llama", platform="amd")
    assert (result.first_step, result.step_interval, len(result.step_times)) == (10, 10, 20)
    assert result.step_times[14] is None and result.loss_values[14] is None  # iteration 150
    assert any("1 iteration(s) missing inside the log (150)" in w for w in result.warnings)
    perf = result.performance_metrics
    assert perf.skipped_steps == 2 and perf.measured_steps == 17  # 18 entries after warm-up, one missing
    logged = [step_ms(k) / 1000 for k in range(1, 21) if k != 15]
    assert perf.median_step_time_seconds == pytest.approx(statistics.median(logged[2:]))
    assert perf.total_time_seconds == pytest.approx(10 * sum(logged))
    assert result.status == "ok"


def test_gaps_are_null_listed_and_left_out_of_the_statistics(tmp_path: Path) -> None:
    log = tmp_path / "gaps.log"
    log.write_text("".join(megatron_line(i, 30, LLAMA, seq=2048, gbs=64, world=8, peak=1e-4, warm=2) + "\n"
                           for i in range(1, 31) if i not in (12, 13, 20)))
    result = analyse(tmp_path, log, model="llama", platform="amd")
    assert len(result.step_times) == 30 and [i for i, t in enumerate(result.step_times, 1) if t is None] == [12, 13, 20]
    assert any("3 iteration(s) missing inside the log (12, 13, 20)" in w for w in result.warnings)
    perf = result.performance_metrics
    assert perf.measured_steps == 24  # 30 entries, 3 warm-up, 3 missing
    assert perf.median_step_time_seconds == pytest.approx(
        statistics.median(step_ms(i) / 1000 for i in range(4, 31) if i not in (12, 13, 20)))


def tprimat_launch(tmp_path: Path, fixture: str, **overrides: str) -> RunContext:
    """A 'mega' job whose stand-in command prints a fixture log: the launcher writes its header first."""
    env = {**FIXTURE_WORKLOAD, "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path / "out"),
           "DATA_DIR": str(tmp_path / "data"), **overrides}
    cfg = load_config(environ=env)
    ctx = RunContext(cfg=cfg, platform="amd", framework="mega", model="llama", run_index=None,
                     result_path=result_path(cfg.output_dir, "amd", "mega", "llama"),
                     log_path=log_path_for(cfg, "amd", "mega", "llama", None), data=job_data(cfg, "llama"),
                     shape=workload_shape(cfg, "llama"))
    script = f"import sys; sys.stdout.write(open({str(FIXTURES / fixture)!r}).read())"

    class StandIn:
        @staticmethod
        def plan(ctx: RunContext) -> LaunchPlan:
            return LaunchPlan(argv=["python3", "-c", script], reads_dataset=False)

        @staticmethod
        def preflight(ctx: RunContext, plan: LaunchPlan) -> tuple[EffectiveSettings, FrameworkVersions]:
            return EffectiveSettings(resolved_by="test stand-in"), FrameworkVersions()

        @staticmethod
        def collect(ctx: RunContext, plan: LaunchPlan, returncode: int) -> None:
            return None

    launch(ctx, StandIn())
    return ctx


def test_a_tprimat_launch_is_recognised_by_its_header_and_checked_against_config(tmp_path: Path) -> None:
    ctx = tprimat_launch(tmp_path, "megatron_core012_llama.log")
    assert ctx.log_path.read_text().startswith("tprimat launch: platform=amd framework=mega model=llama ")
    analysis = analyse_files([ctx.log_path], AnalysisOptions(), load=lambda: ctx.cfg)
    assert analysis.mode == "config" and analysis.result.status == "ok"
    assert (analysis.result.platform, analysis.result.framework) == ("amd", "mega")
    assert analysis.result.training_config.workload.SL == 2048  # config.env's: this log never states SL
    changed = load_config(environ={**FIXTURE_WORKLOAD, "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "LR": "1e-4"})
    failed = analyse_files([ctx.log_path], AnalysisOptions(), load=lambda: changed).result
    assert failed.status == "failed" and "launched with another config" in failed.error
    with pytest.raises(LogInputError, match="--model qwen but the log's tprimat launch header says model=llama"):
        analyse_files([ctx.log_path], AnalysisOptions(model="qwen"), load=lambda: ctx.cfg)


def test_from_log_reads_a_tprimat_log_like_any_other(tmp_path: Path) -> None:
    ctx = tprimat_launch(tmp_path, "megatron_core012_llama.log")
    analysis = analyse_files([ctx.log_path], AnalysisOptions(mode="log"))
    assert analysis.mode == "log"
    result = analysis.result
    assert (result.platform, result.framework, result.model) == ("amd", "mega", "llama")  # named by the header
    assert result.training_config.workload.SL is None and result.training_config.workload.TRAIN_ITERS == 10


def test_from_config_measures_an_old_tprimat_log_without_header(tmp_path: Path) -> None:
    cfg = load_config(environ={**FIXTURE_WORKLOAD, "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env")})
    log = FIXTURES / "megatron_core012_llama.log"
    with pytest.raises(LogInputError, match="pass --platform"):
        analyse_files([log], AnalysisOptions(mode="config"), load=lambda: cfg)
    options = AnalysisOptions(mode="config", platform="amd", framework="mega", model="llama", gpu_name=MI300X)
    analysis = analyse_files([log], options, load=lambda: cfg)
    assert analysis.mode == "config" and analysis.result.status == "ok"
    assert analysis.result.performance_metrics.mfu is not None


def test_strict_mode_checks_the_arguments_block_against_config(tmp_path: Path) -> None:
    cfg = load_config(environ={**FIXTURE_WORKLOAD, "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"),
                               "TRAIN_ITERS": "100", "MBS": "2", "DP": "4", "GA": "16", "TP": "2", "SL": "4096",
                               "WARMUP_STEPS": "10"})
    options = AnalysisOptions(mode="config", platform="nvd", framework="mega", model="llama")
    result = analyse_files([FOREIGN / "megatron_core012_gbs128_llama.log"], options, load=lambda: cfg).result
    assert result.status == "failed"
    assert "the log's arguments say lr: 0.00015 but config.env has LR=0.0003" in result.error
    assert "seed: 1234 but config.env has SEED=42" in result.error
