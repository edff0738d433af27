"""train/nemo/recipe.py + train/nemo/plugin.py overrides_for: config -> NeMo recipe fields, without NeMo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nemo import REPO, make_tokenizer, write_config
from train.nemo.plugin import overrides_for, resolve_shape
from train.nemo.recipe import NemoOverrides
from utils.config.load import load_config
from utils.config.model import WORKLOAD_KEYS
from utils.dataset.paths import dataset_prefix, job_data, tokenizer_dir
from utils.spec.models import get_shape
from utils.spec.registry import MODELS


def _cfg(tmp_path: Path, **overrides: str):
    return load_config(write_config(tmp_path, **overrides), environ={})


def _with_tokenizer(tmp_path: Path, model: str, words: int = 500, **overrides: str):
    cfg = _cfg(tmp_path, **overrides)
    size = make_tokenizer(tokenizer_dir(cfg, model), words)
    return cfg, size


# Each workload key and where it must show up in the overrides (the fairness table, key by key).
def _expectations(cfg, fields):
    scheduler, data = fields["optim.lr_scheduler"], fields["data"]
    devices = fields["trainer.devices"] * fields["trainer.num_nodes"]
    model_parallel = (fields["trainer.strategy.tensor_model_parallel_size"]
                      * fields["trainer.strategy.pipeline_model_parallel_size"]
                      * fields["trainer.strategy.context_parallel_size"])
    return {
        "DATASET": cfg.dataset_name in Path(data["paths"][0]).name,
        # DATA_SAMPLES decides the content of the .bin/.idx the data stage wrote: the path is that dataset's.
        "DATA_SAMPLES": data["paths"] == [str(dataset_prefix(cfg, fields["_model"]))],
        "MODEL_SIZE": fields["model.config.num_layers"] == get_shape(fields["_model"], cfg.model_size).num_layers,
        "SEED": data["seed"] == cfg.seed,
        "MBS": data["micro_batch_size"] == cfg.mbs,
        "GBS": data["global_batch_size"] == cfg.gbs,
        "SL": data["seq_length"] == cfg.sl == fields["model.config.seq_length"],
        "LR": fields["optim.config.lr"] == cfg.lr,
        "MIN_LR": scheduler["min_lr"] == cfg.min_lr == fields["optim.config.min_lr"],
        "LR_DECAY": scheduler["_target_"].endswith("CosineAnnealingScheduler") and scheduler["constant_steps"] == 0,
        "WARMUP_STEPS": scheduler["warmup_steps"] == cfg.warmup_steps,
        "TRAIN_ITERS": fields["trainer.max_steps"] == scheduler["max_steps"] == cfg.train_iters,
        "WEIGHT_DECAY": fields["optim.config.weight_decay"] == cfg.weight_decay,
        "BETA1": fields["optim.config.adam_beta1"] == cfg.beta1,
        "BETA2": fields["optim.config.adam_beta2"] == cfg.beta2,
        "GRAD_CLIP": fields["optim.config.clip_grad"] == cfg.grad_clip,
        "INIT_STD": fields["model.config.init_method_std"] == cfg.init_std,
        "TP": fields["trainer.strategy.tensor_model_parallel_size"] == cfg.tp,
        "PP": fields["trainer.strategy.pipeline_model_parallel_size"] == cfg.pp,
        "CP": fields["trainer.strategy.context_parallel_size"] == cfg.cp,
        "DP": devices // model_parallel == cfg.dp,
        "GA": data["global_batch_size"] // (data["micro_batch_size"] * cfg.dp) == cfg.ga,
        "PRECISION": fields["trainer.plugins"]["_target_"].endswith(".bf16_mixed") and fields["optim.config.bf16"],
        "FP8": "fp8" not in fields["trainer.plugins"]["_target_"],
        "WORLD_SIZE": devices == cfg.world_size,
    }


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_every_workload_key_reaches_a_recipe_field(tmp_path, model):
    # The opposite of each recipe's default layout: llama and mistral default to CP=2, qwen to TP=2.
    layout = {"llama": {"TP": "2", "CP": "1", "DP": "4"}, "qwen": {"TP": "1", "CP": "2", "DP": "4"},
              "mistral": {"TP": "2", "CP": "1", "DP": "4"}}[model]
    cfg, _ = _with_tokenizer(tmp_path, model, **layout)
    overrides = overrides_for(cfg, model, job_data(cfg, model), "train_nvd_nemo_" + model)
    fields = {**overrides.fields, "_model": model}
    checks = _expectations(cfg, fields)
    assert set(checks) == set(WORKLOAD_KEYS), "every workload key must be checked"
    assert [key for key, ok in checks.items() if not ok] == []
    recipe_tp, _, recipe_cp = MODELS[model].stacks.nemo_parallel
    assert (fields["trainer.strategy.tensor_model_parallel_size"], fields["trainer.strategy.context_parallel_size"]) \
        != (recipe_tp, recipe_cp)
    assert fields["trainer.strategy.sequence_parallel"] is (cfg.tp > 1)


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_data_module_reads_the_prepared_dataset_with_the_real_tokenizer(tmp_path, model):
    cfg, _ = _with_tokenizer(tmp_path, model)
    data = overrides_for(cfg, model, job_data(cfg, model), "stem").fields["data"]
    assert data["_target_"] == "nemo.collections.llm.gpt.data.pre_training.PreTrainingDataModule"
    assert data["paths"] == [str(cfg.data_dir / f"sample-{model}_text_document")]
    assert data["tokenizer"]["pretrained_model_name"] == str(cfg.data_dir / "tokenizers" / f"sample-{model}")
    assert data["tokenizer"]["_target_"].endswith("huggingface.auto_tokenizer.AutoTokenizer")
    assert data["split"] == "100,0,0"
    assert Path(data["index_mapping_dir"]).is_relative_to(cfg.output_dir)


def test_mistral_recipe_and_no_sliding_window(tmp_path):
    # NeMo 2.3's MistralConfig7B keeps v0.1's 4096-token window; v0.3 (the shape table) has none.
    cfg, _ = _with_tokenizer(tmp_path, "mistral")
    _with_tokenizer(tmp_path, "llama")
    overrides = overrides_for(cfg, "mistral", job_data(cfg, "mistral"), "stem")
    assert overrides.recipe == "nemo.collections.llm.recipes.mistral_7b.pretrain_recipe"
    assert "model.config.window_size" in overrides.fields and overrides.fields["model.config.window_size"] is None
    assert overrides.fields["model.config.rotary_base"] == 1e6
    assert overrides.fields["model.config.vocab_size"] == get_shape("mistral").vocab_size == 32768
    assert "model.config.window_size" not in overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem").fields
    # MistralConfig7B's cp_comm_type is a2a (for that window); every stack runs p2p (issue 40, finding 5)
    assert overrides.fields["model.config.cp_comm_type"] == "p2p"
    assert overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem").fields["model.config.cp_comm_type"] == "p2p"


def test_no_validation_checkpoint_or_resume(tmp_path):
    cfg, _ = _with_tokenizer(tmp_path, "llama")
    fields = overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem").fields
    assert fields["trainer.limit_val_batches"] == 0 and fields["trainer.num_sanity_val_steps"] == 0
    assert fields["trainer.val_check_interval"] == cfg.train_iters  # an int: NeMo's data module divides by it
    assert fields["trainer.enable_checkpointing"] is False
    assert fields["log"]["ckpt"] is None and fields["log"]["tensorboard"] is None
    assert fields["resume"] is None
    assert fields["trainer.log_every_n_steps"] == 1


def test_tiny_models_take_the_tokenizer_vocabulary(tmp_path):
    cfg, size = _with_tokenizer(tmp_path, "qwen", words=777, MODEL_SIZE="tiny")
    fields = overrides_for(cfg, "qwen", job_data(cfg, "qwen"), "stem").fields
    assert size == 779
    assert fields["model.config.vocab_size"] == 779
    tiny = get_shape("qwen", "tiny")
    assert fields["model.config.hidden_size"] == tiny.hidden_size
    assert fields["model.config.num_query_groups"] == tiny.num_query_groups
    assert fields["model.config.add_qkv_bias"] is True


def test_full_models_keep_the_table_vocabulary_and_reject_a_too_large_tokenizer(tmp_path):
    cfg, _ = _with_tokenizer(tmp_path, "llama", words=1000)
    fields = overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem").fields
    assert fields["model.config.vocab_size"] == 128256
    assert fields["model.config.rotary_base"] == 500000.0 and fields["model.config.scale_factor"] == 8.0
    assert fields["model.config.add_qkv_bias"] is False
    small = get_shape("llama", "full").vocab_size
    make_tokenizer(tokenizer_dir(cfg, "llama"), small)  # small + 2 ids: more than the embedding has
    with pytest.raises(ValueError, match="embedding rows"):
        resolve_shape(cfg, "llama", tokenizer_dir(cfg, "llama"))


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    cfg = _cfg(tmp_path)
    with pytest.raises(FileNotFoundError, match="prepare the data first"):
        overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem")


@pytest.mark.parametrize(("decay", "target"), [
    ("cosine", "CosineAnnealingScheduler"), ("linear", "WarmupAnnealingScheduler"),
    ("constant", "WarmupPolicyScheduler"),
])
def test_lr_decay_picks_the_scheduler(tmp_path, decay, target):
    cfg, _ = _with_tokenizer(tmp_path, "llama", LR_DECAY=decay)
    scheduler = overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem").fields["optim.lr_scheduler"]
    assert scheduler["_target_"] == f"nemo.lightning.pytorch.optim.{target}"
    assert scheduler["max_steps"] == cfg.train_iters  # NeMo's default would be 10


@pytest.mark.parametrize(("precision", "fp8", "plugin", "bf16", "fp16"), [
    ("bf16", "false", "bf16_mixed", True, False),
    ("bf16", "true", "bf16_with_fp8_mixed", True, False),
    ("fp16", "false", "fp16_mixed", False, True),
    ("fp32", "false", "MegatronMixedPrecision", False, False),
])
def test_precision_plugin_and_optimizer_flags_agree(tmp_path, precision, fp8, plugin, bf16, fp16):
    cfg, _ = _with_tokenizer(tmp_path, "qwen", PRECISION=precision, FP8=fp8)
    fields = overrides_for(cfg, "qwen", job_data(cfg, "qwen"), "stem").fields
    assert fields["trainer.plugins"]["_target_"].rsplit(".", 1)[1] == plugin
    assert (fields["optim.config.bf16"], fields["optim.config.fp16"]) == (bf16, fp16)


def test_overrides_are_plain_json_and_round_trip(tmp_path):
    cfg, _ = _with_tokenizer(tmp_path, "llama")
    overrides = overrides_for(cfg, "llama", job_data(cfg, "llama"), "stem")
    data = json.loads(overrides.to_json())
    assert NemoOverrides.from_dict(data) == overrides
    assert data["recipe"] == "nemo.collections.llm.recipes.llama31_8b.pretrain_recipe"
    assert data["recipe_kwargs"]["num_gpus_per_node"] == cfg.gpus_per_node
    with pytest.raises(ValueError, match="fields"):
        NemoOverrides.from_dict({"model": "llama", "recipe": "x", "recipe_kwargs": {}})


def test_mapping_and_launcher_import_without_nemo():
    code = ("import sys, train.nemo.recipe, train.nemo.plugin; "
            "bad = [m for m in ('nemo', 'nemo_run', 'fiddle', 'lightning') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
