"""The prim launcher: the generated Primus experiment, parsed back and compared key by key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from tests.helpers.megatron import FIXTURES, make_config, make_context
from tests.helpers.preflight import FAKE_COMMIT, point_at_fakes
from tests.helpers.proc import free_port
from train.launch.launcher import launch
from train.megatron import args as megatron_args
from train.prim import plugin as prim_plugin
from utils.dataset.paths import dataset_prefix, tokenizer_dir
from utils.result.file import read_result
from utils.spec.models import get_shape

# Primus's own qwen2.5_7B example runs seq 2048, MBS 10, GBS 640, lr 1e-5, 50 iterations, mock data,
# init std 0.008, eod masking and a shuffling data loader; this config differs from every one of them.
DIFFERENT_FROM_PRIMUS = {"SL": "4096", "MBS": "2", "DP": "4", "GA": "4", "TP": "2", "LR": "2e-4", "MIN_LR": "2e-5",
                         "TRAIN_ITERS": "30", "WARMUP_STEPS": "3", "INIT_STD": "0.015", "SEED": "11",
                         "LR_DECAY": "linear", "WEIGHT_DECAY": "0.05", "BETA2": "0.98", "GRAD_CLIP": "0.5"}


def _document(tmp_path: Path, model: str, **overrides: str) -> tuple[dict, object]:
    cfg = make_config(tmp_path, **overrides)
    plan = prim_plugin.plan(make_context(cfg, "amd", "prim", model, dry_run=True))
    (path, text), = plan.files.items()
    assert path == cfg.output_dir / "generated" / f"train_amd_prim_{model}.primus.yaml"
    return yaml.safe_load(text), cfg


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_every_workload_key_is_overridden(tmp_path: Path, model: str) -> None:
    document, cfg = _document(tmp_path, model, **DIFFERENT_FROM_PRIMUS)
    trainer = document["modules"]["pre_trainer"]
    assert trainer["framework"] == "megatron"
    files = {"llama": "llama3.1_8B.yaml", "qwen": "qwen2.5_7B.yaml", "mistral": "llama2_7B.yaml"}
    assert trainer["model"] == files[model]
    overrides = trainer["overrides"]
    workload = {
        "seq_length": cfg.sl, "micro_batch_size": cfg.mbs, "global_batch_size": cfg.gbs, "train_iters": cfg.train_iters,
        "lr": cfg.lr, "min_lr": cfg.min_lr, "lr_decay_style": cfg.lr_decay, "lr_warmup_iters": cfg.warmup_steps,
        "lr_decay_iters": cfg.train_iters, "weight_decay": cfg.weight_decay, "adam_beta1": cfg.beta1,
        "adam_beta2": cfg.beta2, "clip_grad": cfg.grad_clip, "init_method_std": cfg.init_std, "seed": cfg.seed,
        "tensor_model_parallel_size": cfg.tp, "pipeline_model_parallel_size": cfg.pp,
        "context_parallel_size": cfg.cp, "sequence_parallel": True, "bf16": True, "fp16": False, "fp8": None,
        "mock_data": False, "train_data_path": str(dataset_prefix(cfg, model)), "data_path": None,
        "tokenizer_type": "HuggingFaceTokenizer", "tokenizer_model": str(tokenizer_dir(cfg, model)),
        "log_interval": 1, "log_throughput": True, "eval_iters": 0, "save": None, "load": None,
        "disable_last_saving": True, "dataloader_type": "single", "eod_mask_loss": False,
        "log_avg_skip_iterations": cfg.skip_steps, "log_avg_reset_interval": cfg.train_iters,
    }
    for key, value in workload.items():
        assert key in overrides, key
        assert overrides[key] == value, key


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_architecture_keys_come_from_the_shape_table(tmp_path: Path, model: str) -> None:
    document, _cfg = _document(tmp_path, model)
    overrides = document["modules"]["pre_trainer"]["overrides"]
    shape = get_shape(model)
    expected = {
        "num_layers": shape.num_layers, "hidden_size": shape.hidden_size, "ffn_hidden_size": shape.ffn_hidden_size,
        "num_attention_heads": shape.num_attention_heads, "num_query_groups": shape.num_query_groups,
        "group_query_attention": True, "norm_epsilon": shape.norm_eps, "rotary_base": int(shape.rope_theta),
        "add_qkv_bias": shape.qkv_bias, "add_bias_linear": False, "swiglu": True, "normalization": "RMSNorm",
        "use_rope_scaling": shape.rope_scaling is not None, "untie_embeddings_and_output_weights": True,
        "hidden_dropout": 0.0, "attention_dropout": 0.0, "max_position_embeddings": shape.max_position_embeddings,
        "make_vocab_size_divisible_by": {"llama": 128, "qwen": 512, "mistral": 128}[model], "attention_backend": "auto",
    }
    for key, value in expected.items():
        assert overrides[key] == value, key


def test_yaml_and_megatron_command_agree(tmp_path: Path) -> None:
    """Every key Primus gets has the value the mega launcher passes to pretrain_gpt.py on amd."""
    document, cfg = _document(tmp_path, "qwen", **DIFFERENT_FROM_PRIMUS)
    overrides = document["modules"]["pre_trainer"]["overrides"]
    shape = get_shape("qwen")
    padding = megatron_args.vocab_padding(cfg, shape, tokenizer_dir(cfg, "qwen"))
    shared = megatron_args.megatron_settings(cfg, shape, "amd", tokenizer_dir(cfg, "qwen"), padding)
    # The one deliberate exception: Primus always sets a checkpoint path, so Megatron needs an
    # interval; one past the last step writes nothing during the run (mega: no path, no interval).
    assert shared.pop("save_interval") is None and overrides["save_interval"] == cfg.train_iters + 1
    for key, value in shared.items():
        assert overrides[key] == value, key


def test_plan_runs_primus_script_with_exp_and_train_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXP", "/stale/experiment.yaml")  # a stale EXP in the shell must not win
    cfg = make_config(tmp_path, PRIMUS_PATH=str(tmp_path / "primus"), NNODES="2", NODE_RANK="1", DP="16", GA="4")
    plan = prim_plugin.plan(make_context(cfg, "amd", "prim", "llama", dry_run=True))
    assert plan.argv == ["bash", "examples/run_pretrain.sh"] and plan.cwd == tmp_path / "primus"
    (exp_file,) = plan.files
    assert plan.env["EXP"] == str(exp_file) and plan.env["TRAIN_LOG"] in map(str, plan.extra_logs)
    assert (plan.env["NNODES"], plan.env["NODE_RANK"], plan.env["GPUS_PER_NODE"]) == ("2", "1", "8")
    assert plan.env["HSA_NO_SCRATCH_RECLAIM"] == "1"
    assert any("Primus not found" in note for note in plan.notes)
    with pytest.raises(FileNotFoundError, match="Primus not found"):
        prim_plugin.plan(make_context(cfg, "amd", "prim", "llama"))
    with pytest.raises(ValueError, match="amd only"):
        prim_plugin.plan(make_context(cfg, "nvd", "prim", "llama", dry_run=True))


FAKE_RUN_PRETRAIN = """\
#!/bin/bash
# stand-in for Primus's examples/run_pretrain.sh: check EXP, write TRAIN_LOG, print the fixture, exit 1
test -f "$EXP" || exit 9
grep -q 'mock_data: false' "$EXP" || exit 8
cp "{log}" "$TRAIN_LOG"
cat "{log}"
exit 1
"""


@pytest.mark.slow
def test_launch_end_to_end_failure_is_a_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    primus = tmp_path / "primus"
    (primus / "examples").mkdir(parents=True)
    script = primus / "examples" / "run_pretrain.sh"
    script.write_text(FAKE_RUN_PRETRAIN.format(log=FIXTURES / "primus_rccl_error_llama.log"), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    point_at_fakes(monkeypatch, tmp_path / "preflight")  # the preflight asks the recording stand-in
    # a port of its own: the launcher refuses a taken one, and another clone's suite may hold the default
    cfg = make_config(tmp_path, PRIMUS_PATH=str(primus), MASTER_PORT=str(free_port()), MEGATRON_REF=FAKE_COMMIT)
    for suffix in (".bin", ".idx"):
        target = Path(f"{dataset_prefix(cfg, 'llama')}{suffix}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")
    tokenizer_dir(cfg, "llama").mkdir(parents=True)
    (tokenizer_dir(cfg, "llama") / "tokenizer.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(megatron_args, "tokenizer_size", lambda *_: (128256, "test stand-in"))
    # stand-in data (empty .bin/.idx): the launcher's dataset check is tested in tests/unit/data/test_data_ready.py
    monkeypatch.setattr("train.launch.checks.dataset_problem", lambda cfg, model: None)
    ctx = make_context(cfg, "amd", "prim", "llama")
    assert launch(ctx, prim_plugin) == 1
    result = read_result(ctx.result_path)
    assert result.status == "failed"
    assert "NCCL/RCCL error" in result.error and "exited with code 1" in result.error
    (experiment,) = result.source.generated_files
    assert experiment.endswith("train_amd_prim_llama.primus.yaml")
    assert len(result.step_times) == 2
