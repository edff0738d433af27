"""``deep``: the DeepSpeed launcher through what it produces, and real tiny ZeRO runs on cpu.

DeepSpeed's CPU accelerator runs with the gloo backend here, so the cpu runs are real:
the same model, samples and LR as ``tran``, trained by the DeepSpeed engine.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.proc import run_module
from tests.helpers.workload import tiny_environ
from train.deep import plugin as deep_plugin
from train.launch.context import log_path_for
from train.launch.contract import RunContext
from utils.config.load import load_config
from utils.config.model import Config
from utils.dataset.paths import job_data
from utils.result.file import read_result, result_path
from utils.spec.models import workload_shape

LAUNCH = ("train.launch.launcher", "--platform", "cpu", "--framework", "deep")


def _ctx(cfg: Config, platform: str, model: str = "llama", dry_run: bool = False) -> RunContext:
    return RunContext(cfg=cfg, platform=platform, framework="deep", model=model, run_index=None,
                      result_path=result_path(cfg.output_dir, platform, "deep", model),
                      log_path=log_path_for(cfg, platform, "deep", model, None), data=job_data(cfg, model),
                      shape=workload_shape(cfg, model),
                      dry_run=dry_run)


@pytest.mark.parametrize(("stage", "precision"), [("0", "bf16"), ("1", "bf16"), ("2", "fp16"), ("3", "fp32")])
def test_deepspeed_config_key_by_key(tmp_path: Path, stage: str, precision: str) -> None:
    cfg = load_config(environ=tiny_environ(tmp_path, tmp_path / "out", ZERO_STAGE=stage, PRECISION=precision,
                                           MBS="2", DP="2", GA="3", GPUS_PER_NODE="2", GRAD_CLIP="0.5"))
    config = deep_plugin.deepspeed_config(cfg)
    assert config == {
        "train_batch_size": 12, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3,
        "gradient_clipping": 0.5,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": {"enabled": precision == "fp16", "loss_scale": 0},
        "communication_data_type": precision,
        "zero_optimization": {"stage": int(stage), "overlap_comm": False, "contiguous_gradients": True},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": cfg.train_iters + 1,
        "wall_clock_breakdown": False,
    }
    assert config["train_batch_size"] == cfg.gbs == cfg.mbs * cfg.dp * cfg.ga


def test_dry_run_prints_the_command_and_the_generated_config(tmp_path: Path) -> None:
    env = tiny_environ(tmp_path / "data", tmp_path / "out", DP="2", GPUS_PER_NODE="2", ZERO_STAGE="2")
    proc = run_module(*LAUNCH, "--model", "mistral", "--dry-run", "--run-index", "2", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    command = proc.stdout.splitlines()[1]
    generated = tmp_path / "out" / "generated" / "train_cpu_deep_mistral_r2.deepspeed.json"
    for part in ("-m torch.distributed.run", "--nproc-per-node=2", "--nnodes=1", "-m train.deep.worker",
                 "--model mistral", "--platform cpu", "--run-index 2", f"--deepspeed-config {generated}",
                 f"--result {tmp_path / 'out' / 'train_cpu_deep_mistral_r2.json'}"):
        assert part in command, command
    assert "DS_ACCELERATOR=cpu" in proc.stdout and "OMP_NUM_THREADS=" in proc.stdout
    text = proc.stdout.split(f"# generated file: {generated}\n", 1)[1].split("\n# note:", 1)[0]
    shown = json.loads(text)
    assert shown["zero_optimization"]["stage"] == 2 and shown["train_batch_size"] == 8
    assert "ZeRO stage 2 (ZERO_STAGE)" in proc.stdout
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_gpu_plans_multi_node(tmp_path: Path, platform: str) -> None:
    cfg = load_config(environ=tiny_environ(tmp_path, tmp_path / "out", PLATFORM=platform, DP="16", NNODES="2",
                                           NODE_RANK="1", GPUS_PER_NODE="8", MASTER_ADDR="node0",
                                           MASTER_PORT="29999"))
    plan = deep_plugin.plan(_ctx(cfg, platform))
    for flag in ("--nproc-per-node=8", "--nnodes=2", "--node-rank=1", "--master-addr=node0", "--master-port=29999"):
        assert flag in plan.argv
    assert plan.argv[plan.argv.index("-m", 3) + 1] == "train.deep.worker"
    assert plan.env["DS_ACCELERATOR"] == "cuda" and "OMP_NUM_THREADS" not in plan.env
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in plan.env  # the platform's launcher table, as for tran
    (path, text), = plan.files.items()
    assert path == cfg.output_dir / "generated" / f"train_{platform}_deep_llama.deepspeed.json"
    assert json.loads(text) == deep_plugin.deepspeed_config(cfg)
    assert plan.argv[plan.argv.index("--deepspeed-config") + 1] == str(path)


@pytest.mark.parametrize(("override", "message"), [
    ({"FP8": "true"}, "FP8=true is not supported by tran"),
    ({"TP": "2", "DP": "1", "GPUS_PER_NODE": "2", "MODELS": "llama"}, "tran is data-parallel only"),
])
def test_what_tran_cannot_run_deep_refuses_too(tmp_path: Path, override: dict[str, str], message: str) -> None:
    cfg = load_config(environ=tiny_environ(tmp_path, tmp_path / "out", **override))
    with pytest.raises(ValueError, match=message):
        deep_plugin.plan(_ctx(cfg, "cpu"))


def test_missing_deepspeed_is_a_failed_result_before_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    from train.launch import launcher as launch

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real(name, *a))
    for key, value in tiny_environ(tmp_path / "data", tmp_path / "out").items():
        monkeypatch.setenv(key, value)
    assert launch.main(["--platform", "cpu", "--framework", "deep", "--model", "qwen"]) == 1
    assert "DeepSpeed is not installed" in capsys.readouterr().err
    result = read_result(tmp_path / "out" / "train_cpu_deep_qwen.json")
    assert result.status == "failed" and "DeepSpeed is not installed" in result.error
    assert "cpu-requirements.txt" in result.error
    # A dry run still shows the plan, with the reason as a note.
    assert launch.main(["--platform", "cpu", "--framework", "deep", "--model", "qwen", "--dry-run"]) == 0
    assert "DeepSpeed is not installed" in capsys.readouterr().out


@pytest.mark.slow
def test_deepspeed_that_fails_to_import_in_the_worker_leaves_a_failed_result(
        tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    shim = tmp_path / "shim" / "deepspeed"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("deepspeed stand-in: broken install")\n')
    env = tiny_env(TRAIN_ITERS="3")
    env["PYTHONPATH"] = str(shim.parent)
    proc = run_module(*LAUNCH, "--model", "llama", env=env, timeout=300)
    assert proc.returncode == 1
    result = read_result(Path(env["OUTPUT_DIR"]) / "train_cpu_deep_llama.json")
    assert result.status == "failed" and "deepspeed stand-in: broken install" in result.error
    assert result.source.kind == "callback"  # rank 0's own guard wrote it, not the launcher's fallback


def _run(env: dict[str, str], framework: str, model: str):
    proc = run_module("train.launch.launcher", "--platform", "cpu", "--framework", framework, "--model", model, env=env,
                      timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return read_result(Path(env["OUTPUT_DIR"]) / f"train_cpu_{framework}_{model}.json")


@pytest.mark.slow
def test_two_rank_zero2_run_trains_like_tran(tiny_env: Callable[..., dict[str, str]]) -> None:
    # bf16 on any CPU (CPU_PRECISION): what this test compares is DeepSpeed's bf16 against tran's
    env = tiny_env(DP="2", GPUS_PER_NODE="2", GA="1", TRAIN_ITERS="8", ZERO_STAGE="2", CPU_PRECISION="bf16")
    deep, tran = _run(env, "deep", "llama"), _run(env, "tran", "llama")
    assert deep.status == "ok" and (deep.framework, deep.platform) == ("deep", "cpu")
    assert deep.training_config.world_size_started == 2 and deep.training_config.global_batch_size == 4
    settings = deep.effective_settings.settings
    assert settings["zero_stage"] == 2 and settings["gradient_accumulation_steps"] == 1
    # DeepSpeed's values under the names the other frameworks use, over the configuration deep was given
    assert (settings["precision"], settings["global_batch_size"], settings["clip_grad"]) == ("bf16", 4, 1.0)
    assert settings["grad_reduce_in_fp32"] is False and settings["communication_data_type"] == "torch.bfloat16"
    assert settings["lr"] == float(env["LR"]) and settings["seq_length"] == tran.training_config.sequence_length
    tran_settings = tran.effective_settings.settings
    differ = {key: (settings[key], tran_settings[key]) for key in tran_settings
              if key in settings and settings[key] != tran_settings[key]}
    # the only differences: DeepSpeed's ZeRO-2 reduces bf16 gradients without overlap; tran's FSDP2
    # reduce-scatters fp32, overlapped
    assert differ == {"grad_reduce_in_fp32": (False, True), "overlap_grad_reduce": (False, True),
                      "sharding": ("ZeRO-2", "FSDP2 (fully_shard)"), "grad_reduce_dtype": ("bf16", "fp32")}
    assert settings["client_optimizer"] == "AdamW"
    assert deep.effective_settings.resolved_by.startswith("deepspeed.initialize (DeepSpeed ")
    assert "ZeRO stage 2" in deep.training_config.precision_detail
    assert deep.training_config.precision_effective == "bf16"
    assert deep.learning_rates == pytest.approx(tran.learning_rates)
    assert len(deep.step_times) == 8 and deep.performance_metrics.measured_steps == 6
    assert "deepspeed" in deep.environment.libraries
    # Same initial weights, samples and LR: the loss curves agree up to bf16 rounding (tran keeps fp32 weights
    # under bf16 autocast; DeepSpeed's bf16 keeps bf16 weights and fp32 master copies).
    gaps = [abs(a - b) / b for a, b in zip(deep.loss_values, tran.loss_values, strict=True)]
    assert gaps[0] < 1e-3 and max(gaps) < 2e-2, gaps
    losses = deep.loss_values
    assert statistics.fmean(losses[-3:]) < statistics.fmean(losses[:3])


@pytest.mark.slow
def test_mistral_under_zero3(tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    extensions = tmp_path / "torch_extensions"  # this job's own: the checkout's may hold an op built before
    result = _run(tiny_env(TRAIN_ITERS="4", ZERO_STAGE="3", TORCH_EXTENSIONS_DIR=str(extensions)), "deep", "mistral")
    assert result.status == "ok" and result.model == "mistral"
    # A cpu job does not compile DeepSpeed's inference-only shared-memory op (train/deep/worker.py)
    assert not list(extensions.glob("**/deepspeed_shm_comm*")), sorted(extensions.rglob("*"))
    assert result.model_shape.hf_architecture == "MistralForCausalLM" and result.model_shape.size == "tiny"
    assert result.effective_settings.settings["zero_stage"] == 3
    assert result.effective_settings.settings["optimizer"] == "DeepSpeedZeroOptimizer_Stage3"


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    # in this process: tests/house/test_entry_points.py runs `python -m train.deep.worker --help` as its own process
    from train.deep.worker import main

    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    out = capsys.readouterr().out
    assert stopped.value.code == 0 and "--deepspeed-config" in out and "--model" in out
