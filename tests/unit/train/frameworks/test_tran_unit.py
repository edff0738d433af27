"""The pieces of ``tran`` in-process: LR schedule, sampler, model construction, plugin, measured loop."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from train.launch.contract import RunContext
from train.rules.schedule import lr_at
from train.tran.step import Dist, Trainer, build_model
from utils.config.load import load_config
from utils.config.model import Config
from utils.dataset.paths import job_data, load_tokenizer, tokenizer_dir, vocab_size
from utils.result.file import read_result
from utils.spec.models import get_shape, workload_shape

# ---------------------------------------------------------------------------
# LR schedule


def test_lr_warmup_then_cosine_to_min_lr() -> None:
    cfg = Config(lr=1.0, min_lr=0.1, warmup_steps=4, train_iters=14, dp=1, gpus_per_node=1)
    assert [lr_at(k, cfg) for k in (1, 2, 4)] == [0.25, 0.5, 1.0]
    assert lr_at(9, cfg) == pytest.approx(0.1 + 0.9 * 0.5)  # halfway through the decay: cos(pi/2) = 0
    assert lr_at(14, cfg) == pytest.approx(0.1)
    assert lr_at(20, cfg) == pytest.approx(0.1)  # past the end it stays at MIN_LR


def test_lr_linear_and_constant_decay() -> None:
    linear = Config(lr=1.0, min_lr=0.0, warmup_steps=0, train_iters=10, lr_decay="linear", dp=1, gpus_per_node=1)
    assert [lr_at(k, linear) for k in (0, 5, 10)] == pytest.approx([1.0, 0.5, 0.0])
    constant = Config(lr=2.0, min_lr=0.0, warmup_steps=2, train_iters=10, lr_decay="constant", dp=1,
                      gpus_per_node=1)
    assert [lr_at(k, constant) for k in (1, 2, 3, 10)] == [1.0, 2.0, 2.0, 2.0]


# ---------------------------------------------------------------------------
# the real sample dataset (its sample order is tested in tests/unit/train/rules/test_sample_order.py)


@pytest.fixture
def sample_cfg(sample_data_dir: Path, tmp_path: Path) -> Callable[..., Config]:
    from tests.helpers.workload import tiny_environ

    def make(**overrides: str) -> Config:
        return load_config(environ=tiny_environ(sample_data_dir, tmp_path / "out", **overrides))

    return make


# ---------------------------------------------------------------------------
# model construction


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_model_matches_the_shape_table(model: str, sample_cfg: Callable[..., Config]) -> None:
    vocab = vocab_size(load_tokenizer(tokenizer_dir(sample_cfg(), model)))
    shape = get_shape(model, "tiny", vocab_size=vocab)
    torch.manual_seed(0)
    net = build_model(model, shape, torch.device("cpu"), init_std=0.01)
    config = net.config
    assert type(net).__name__ == shape.hf_architecture
    assert sum(p.numel() for p in net.parameters()) == shape.parameter_count()
    assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size) == (
        shape.num_layers, shape.hidden_size, shape.ffn_hidden_size)
    assert (config.num_attention_heads, config.num_key_value_heads, config.vocab_size) == (
        shape.num_attention_heads, shape.num_query_groups, vocab)
    assert config.rope_parameters["rope_theta"] == shape.rope_theta and config.rms_norm_eps == shape.norm_eps
    assert config._attn_implementation == "sdpa" and not config.tie_word_embeddings
    assert net.lm_head.weight.data_ptr() != net.model.embed_tokens.weight.data_ptr()
    assert (net.model.layers[0].self_attn.q_proj.bias is not None) == shape.qkv_bias
    if model == "llama":
        assert config.rope_parameters["rope_type"] == "llama3" and config.rope_parameters["factor"] == 8.0
    if model == "mistral":  # v0.3: full causal attention, not MistralConfig's default 4096-token window
        assert config.sliding_window is None and config.head_dim == shape.head_dim
    assert float(net.model.embed_tokens.weight.detach().std()) == pytest.approx(0.01, rel=0.05)  # INIT_STD


# ---------------------------------------------------------------------------
# plugin


def test_plan_sets_omp_threads_on_cpu_only(tmp_path: Path) -> None:
    import os

    from train.tran import plugin as tran_plugin

    cfg = Config(dp=2, gpus_per_node=2, output_dir=tmp_path)
    ctx = RunContext(cfg=cfg, platform="cpu", framework="tran", model="llama", run_index=2,
                     result_path=tmp_path / "r.json", log_path=tmp_path / "r.log", data=job_data(cfg, "llama"),
    shape=workload_shape(cfg, "llama"))
    plan = tran_plugin.plan(ctx)
    cores = len(os.sched_getaffinity(0))
    if "OMP_NUM_THREADS" not in os.environ:
        assert plan.env["OMP_NUM_THREADS"] == str(max(1, cores // 2))
    assert plan.argv[plan.argv.index("-m", 3) + 1] == "train.tran.worker"
    assert plan.argv[-2:] == ["--run-index", "2"]
    eight = Config(dp=8, gpus_per_node=8)
    gpu = tran_plugin.plan(RunContext(cfg=eight, platform="nvd", framework="tran", model="qwen", run_index=None,
                                      result_path=tmp_path / "q.json", log_path=tmp_path / "q.log",
                                      data=job_data(eight, "qwen"), shape=workload_shape(eight, "qwen")))
    assert "OMP_NUM_THREADS" not in gpu.env and "CUDA_DEVICE_MAX_CONNECTIONS" in gpu.env
    assert "--nproc-per-node=8" in gpu.argv
    assert tran_plugin.collect(ctx, plan, 1) is None  # no result file: the launcher records the failure


# ---------------------------------------------------------------------------
# the measured loop, in-process (world size 1)


def run_in_process(cfg: Config, result: Path) -> None:
    from train.tran.worker import StopRequest, train

    args = argparse.Namespace(model="llama", platform="cpu", result=result, run_index=None, log_path=None)
    train(cfg, args, Dist(0, 0, 1, torch.device("cpu")), StopRequest())


@pytest.mark.slow
def test_same_seed_same_losses_and_profiler_trace(sample_cfg: Callable[..., Config], tmp_path: Path) -> None:
    profiled = sample_cfg(TRAIN_ITERS="5", PROFILING="true", PROFILE_STEP_START="2", PROFILE_STEP_END="4")
    run_in_process(profiled, tmp_path / "a" / "train_cpu_tran_llama.json")
    run_in_process(sample_cfg(TRAIN_ITERS="5"), tmp_path / "b" / "train_cpu_tran_llama.json")
    a = read_result(tmp_path / "a" / "train_cpu_tran_llama.json")
    b = read_result(tmp_path / "b" / "train_cpu_tran_llama.json")
    assert a.status == b.status == "ok"
    assert a.loss_values == b.loss_values  # same SEED: same init, same samples, same losses
    trace = profiled.output_dir / "profiles" / "train_cpu_tran_llama_rank0.json"
    assert a.profiling.steps == [3, 4] and a.profiling.rank0_trace == str(trace)
    assert any("torch.profiler" in w for w in a.warnings)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any("ProfilerStep#" in str(e.get("name")) for e in events)
    assert b.profiling is None


@pytest.mark.slow
def test_non_finite_loss_fails_the_run(sample_cfg: Callable[..., Config], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real_step = Trainer.step

    def poisoned(self: Trainer, index: int) -> torch.Tensor:
        loss = real_step(self, index)
        return loss * math.nan if index == 2 else loss

    monkeypatch.setattr(Trainer, "step", poisoned)
    path = tmp_path / "train_cpu_tran_llama.json"
    with pytest.raises(FloatingPointError, match="non-finite loss at step 3"):
        run_in_process(sample_cfg(TRAIN_ITERS="6"), path)
    result = read_result(path)
    assert result.status == "failed"
    assert result.error == "FloatingPointError: non-finite loss at step 3 (3 of 6 steps done)"
    assert len(result.step_times) == 3 and result.loss_values[2] is None
