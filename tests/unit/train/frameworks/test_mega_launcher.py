"""The mega launcher: pretrain_gpt.py arguments checked flag by flag, path handling, dry-run, collect."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.helpers.megatron import FIXTURES, make_config, make_context, parse_flags
from tests.helpers.preflight import FAKE_COMMIT, point_at_fakes
from tests.helpers.proc import free_port
from train.launch.launcher import launch
from train.mega import plugin as mega_plugin
from train.megatron import args as megatron_args
from train.megatron import trees
from train.settings.platform_env import ATTENTION_BACKEND_ENV, PLATFORM_ENV
from utils.config.model import REPO_ROOT
from utils.dataset.paths import dataset_prefix, tokenizer_dir
from utils.result.file import read_result
from utils.spec.models import get_shape
from utils.spec.registry import MODELS


def _flags(cfg, platform: str, model: str) -> dict[str, list[str]]:
    shape = get_shape(model, cfg.model_size)
    argv = mega_plugin.megatron_args(cfg, shape, platform, dataset_prefix(cfg, model), tokenizer_dir(cfg, model))
    return parse_flags(argv)


@pytest.mark.parametrize("platform", ["nvd", "amd"])
@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_arguments_match_shape_table_and_config(tmp_path: Path, platform: str, model: str) -> None:
    cfg = make_config(tmp_path)
    shape = get_shape(model, "full")
    flags = _flags(cfg, platform, model)
    expected_values = {
        "--num-layers": shape.num_layers, "--hidden-size": shape.hidden_size,
        "--ffn-hidden-size": shape.ffn_hidden_size, "--num-attention-heads": shape.num_attention_heads,
        "--num-query-groups": shape.num_query_groups, "--normalization": "RMSNorm",
        "--position-embedding-type": "rope", "--rotary-base": int(shape.rope_theta),
        "--seq-length": cfg.sl, "--max-position-embeddings": shape.max_position_embeddings,
        "--micro-batch-size": cfg.mbs, "--global-batch-size": cfg.gbs,
        "--tensor-model-parallel-size": cfg.tp, "--pipeline-model-parallel-size": cfg.pp,
        "--context-parallel-size": cfg.cp, "--train-iters": cfg.train_iters, "--seed": cfg.seed,
        "--lr-decay-style": cfg.lr_decay, "--lr-warmup-iters": cfg.warmup_steps,
        "--lr-decay-iters": cfg.train_iters, "--eval-iters": 0, "--log-interval": 1,
        "--tokenizer-type": "HuggingFaceTokenizer", "--tokenizer-model": tokenizer_dir(cfg, model),
        "--data-path": dataset_prefix(cfg, model), "--split": "100,0,0",
        "--attention-backend": {"nvd": "fused", "amd": "auto"}[platform],
    }
    for flag, value in expected_values.items():
        assert flags[flag] == [str(value)], flag
    floats = {"--norm-epsilon": shape.norm_eps, "--lr": cfg.lr, "--min-lr": cfg.min_lr,
              "--adam-beta1": cfg.beta1, "--adam-beta2": cfg.beta2, "--weight-decay": cfg.weight_decay,
              "--clip-grad": cfg.grad_clip, "--init-method-std": cfg.init_std, "--hidden-dropout": 0.0,
              "--attention-dropout": 0.0}
    for flag, value in floats.items():
        assert len(flags[flag]) == 1 and float(flags[flag][0]) == value, flag
    for switch in ("--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
                   "--disable-bias-linear", "--use-distributed-optimizer", "--bf16", "--log-throughput"):
        assert flags[switch] == [], switch
    assert ("--add-qkv-bias" in flags) == (model == "qwen")
    assert ("--use-rope-scaling" in flags) == (model == "llama")
    if model == "llama":
        assert float(flags["--rope-scaling-factor"][0]) == shape.rope_scaling["factor"]
    assert ("--no-gradient-accumulation-fusion" in flags) == (platform == "amd")
    for absent in ("--save", "--load", "--fp16", "--fp8-format", "--sequence-parallel", "--mock-data"):
        assert absent not in flags, absent


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_padded_vocabulary_equals_shape_table(tmp_path: Path, model: str) -> None:
    cfg = make_config(tmp_path)
    divisor = int(_flags(cfg, "nvd", model)["--make-vocab-size-divisible-by"][0])
    padded = megatron_args.megatron_padded_vocab(MODELS[model].stacks.megatron_tokenizer_size, divisor, cfg.tp)
    assert padded == get_shape(model).vocab_size
    assert divisor == {"llama": 128, "qwen": 512, "mistral": 128}[model]


def test_vocab_padding_rule_follows_megatron() -> None:
    # ceil(v / (d * TP)) * d * TP, as megatron's vocab_size_with_padding computes it
    assert megatron_args.megatron_padded_vocab(151665, 128, 1) == 151680
    assert megatron_args.choose_vocab_padding(128256, 128256, 4) == (64, 128256)
    assert megatron_args.choose_vocab_padding(151665, 152064, 2) == (256, 152064)
    assert megatron_args.choose_vocab_padding(8000, 152064, 1) == (128, 8064)  # unreachable: Megatron default


def test_config_change_shows_in_command(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, SL="4096", TP="2", DP="4", MBS="2", GA="4", FP8="true", SEED="7")
    flags = _flags(cfg, "nvd", "llama")
    assert flags["--seq-length"] == ["4096"]
    assert flags["--tensor-model-parallel-size"] == ["2"]
    assert flags["--micro-batch-size"] == ["2"] and flags["--global-batch-size"] == ["32"]
    assert flags["--sequence-parallel"] == []
    assert flags["--fp8-format"] == ["hybrid"] and flags["--seed"] == ["7"]
    plan = mega_plugin.plan(make_context(cfg, "nvd", "mega", "llama", dry_run=True))
    assert "--nproc-per-node=8" in plan.argv and "--master-port=29500" in plan.argv
    assert plan.argv[plan.argv.index("--seq-length") + 1] == "4096"


def test_missing_megatron_is_an_error_but_dry_run_notes_it(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, MEGATRON_PATH=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"Megatron-LM not found.*nowhere"):
        mega_plugin.plan(make_context(cfg, "nvd", "mega", "llama"))
    plan = mega_plugin.plan(make_context(cfg, "nvd", "mega", "llama", dry_run=True))
    assert str(tmp_path / "nowhere" / "pretrain_gpt.py") in plan.argv
    assert any("Megatron-LM not found" in note for note in plan.notes)
    assert set(plan.env) == set(PLATFORM_ENV["nvd"]) | set(ATTENTION_BACKEND_ENV["fused"])


def test_image_locations_per_platform(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    # One Megatron-LM (MEGATRON_REF, installed by both Dockerfiles) for mega on both vendors.
    assert trees.megatron_candidates(cfg, "nvd") == [Path("/opt/tprimat/megatron-lm")]
    assert trees.megatron_candidates(cfg, "amd") == [Path("/opt/tprimat/megatron-lm")]
    cfg = make_config(tmp_path, PRIMUS_PATH="/opt/primus")
    assert trees.primus_megatron(cfg) == Path("/opt/primus/third_party/Megatron-LM")


def test_collect_nonzero_exit_gives_failed_result(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    ctx = make_context(cfg, "nvd", "mega", "llama")
    ctx.log_path.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "megatron_core012_llama.log", ctx.log_path)
    plan = mega_plugin.plan(make_context(cfg, "nvd", "mega", "llama", dry_run=True))
    result = mega_plugin.collect(ctx, plan, 1)
    assert result.status == "failed" and "exited with code 1" in result.error
    assert result.source.log_path == str(ctx.log_path) and result.source.kind == "log"
    assert result.source.command == plan.argv and result.source.generated_files == []
    assert result.environment.launcher_set["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert result.fingerprint.data.hash is None and result.fingerprint.data.reason  # no data in tmp
    assert result.warnings[: len(plan.notes)] == plan.notes
    assert len(result.step_times) == 10


FAKE_PRETRAIN = """\
import sys
lines = open({log!r}, encoding="utf-8").read()
sys.stdout.write(lines)
sys.exit({code})
"""


@pytest.mark.slow
@pytest.mark.parametrize("code, status", [(0, "ok"), (3, "failed")])
def test_launch_end_to_end_with_a_stand_in_megatron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    code: int, status: str) -> None:
    """plan -> torchrun -> log -> collect -> result file, with a pretrain_gpt.py that replays a fixture log."""
    fake = tmp_path / "megatron"
    fake.mkdir()
    (fake / "pretrain_gpt.py").write_text(
        FAKE_PRETRAIN.format(log=str(FIXTURES / "megatron_core012_llama.log"), code=code), encoding="utf-8")
    point_at_fakes(monkeypatch, tmp_path / "preflight")  # the preflight asks the recording stand-in
    # a port of its own: torchrun binds it, and another clone's suite may be running this test at once
    cfg = make_config(tmp_path, MEGATRON_PATH=str(fake), GPUS_PER_NODE="1", DP="1", GA="64",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), MEGATRON_REF=FAKE_COMMIT)
    for suffix in (".bin", ".idx"):
        Path(f"{dataset_prefix(cfg, 'llama')}{suffix}").parent.mkdir(parents=True, exist_ok=True)
        Path(f"{dataset_prefix(cfg, 'llama')}{suffix}").write_bytes(b"")
    tokenizer_dir(cfg, "llama").mkdir(parents=True)
    (tokenizer_dir(cfg, "llama") / "tokenizer.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(megatron_args, "tokenizer_size", lambda *_: (128256, "test stand-in"))
    # stand-in data (empty .bin/.idx): the launcher's dataset check is tested in tests/unit/data/test_data_ready.py
    monkeypatch.setattr("train.launch.checks.dataset_problem", lambda cfg, model: None)
    # the fixture was logged with 8 GPUs; with one GPU the per-GPU throughput is 8x and the log still GBS 64
    # the whole 8B on one H100 is refused by the memory check (tests/unit/train/launch/test_model_layers_launch.py):
    # --force
    ctx = replace(make_context(cfg, "nvd", "mega", "llama"), force=True)
    rc = launch(ctx, mega_plugin)
    result = read_result(ctx.result_path)
    assert result.status == status and rc == (0 if status == "ok" else 1)
    assert result.memory_estimate.forced and any(w.startswith("--force: estimated") for w in result.warnings)
    assert len(result.step_times) == 10 and result.step_times[2] == pytest.approx(1.9912)
    assert "iteration       10/      10" in ctx.log_path.read_text(encoding="utf-8")
    # the preflight's record and the framework versions are kept in the result
    assert result.effective_settings.resolved_by.startswith("Megatron-LM 0123456789ab")
    assert result.effective_settings.settings["attention_backend"] == "fused"
    assert result.framework_versions.megatron_lm_commit == FAKE_COMMIT


def test_dry_run_through_the_cli(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path),
           "DATA_DIR": str(tmp_path / "data"), "SL": "4096", "TP": "2", "DP": "4", "GA": "16"}
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "nvd", "--framework", "mega",
                           "--model", "llama", "--dry-run"], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    command = proc.stdout.split("\n")[1]
    assert "pretrain_gpt.py" in command and "--seq-length 4096" in command
    assert "--tensor-model-parallel-size 2" in command and "--global-batch-size 64" in command
    assert "CUDA_DEVICE_MAX_CONNECTIONS=1" in proc.stdout
    assert not (tmp_path / "train_nvd_mega_llama.json").exists()  # a dry run writes nothing


@pytest.mark.parametrize(("platform", "framework"), [("nvd", "mega"), ("amd", "mega"), ("amd", "prim"),
                                                      ("nvd", "nemo")])
def test_attention_switches_agree_with_the_backend_even_when_the_shell_sets_others(
        tmp_path, monkeypatch, platform, framework):
    """Megatron asserts at model build that NVTE_{FLASH,FUSED,UNFUSED}_ATTN are unset or match
    --attention-backend; a shell's NVTE_FLASH_ATTN=1 must not reach a fused-attention run."""
    from train.megatron.args import ATTENTION_BACKEND

    monkeypatch.setenv("NVTE_FLASH_ATTN", "1")
    monkeypatch.setenv("NVTE_FUSED_ATTN", "1")
    cfg = make_config(tmp_path)
    if framework == "nemo":
        from tests.helpers.nemo import make_tokenizer
        from train.nemo import plugin as nemo_plugin
        from utils.dataset.paths import tokenizer_dir

        make_tokenizer(tokenizer_dir(cfg, "llama"), 400)
        plan = nemo_plugin.plan(make_context(cfg, platform, framework, "llama"))
        fields = json.loads(next(iter(plan.files.values())))["fields"]
        backend = fields["model.config.attention_backend"]["name"]
        assert backend == ATTENTION_BACKEND[platform]
    else:
        plugin = importlib.import_module(f"train.{framework}.plugin")
        plan = plugin.plan(make_context(cfg, platform, framework, "llama", dry_run=True))
        if framework == "mega":
            flags = parse_flags(plan.argv[plan.argv.index(next(a for a in plan.argv
                                                               if a.endswith("pretrain_gpt.py"))) + 1:])
            backend = flags["--attention-backend"][0]
        else:
            backend = yaml.safe_load(next(iter(plan.files.values())))["modules"]["pre_trainer"]["overrides"][
                "attention_backend"]
    for name, value in ATTENTION_BACKEND_ENV[backend].items():
        assert plan.env[name] == value, f"{name}={plan.env[name]} contradicts --attention-backend {backend}"
