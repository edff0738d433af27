"""train/profiles/: the vendor recipes as data, PROFILE and PROFILE_FALLBACK, and the fit checks.

The recipes' values are checked against what they claim to come from where that source is in
the repository's reach (the tables themselves); the real frameworks judge the generated
configurations in tests/conformance/test_conformance_profiles.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.helpers.megatron import make_config
from train.profiles import IDENTICAL, ProfileError, amd, apply_profile, available, find_recipe, nvd
from train.profiles.apply import TABLES
from train.profiles.recipe import WORKLOAD_FIELDS, Recipe, Setting, Source, VendorTable
from train.settings.expected import FIXED, FP8_FIXED
from utils.config.rules import ConfigError

JOBS = [("nvd", "mega"), ("nvd", "nemo"), ("amd", "mega"), ("amd", "prim")]
RECIPES = [nvd.LLAMA3_8B_H100, amd.LLAMA31_8B_MI300X, amd.QWEN25_7B_MI300X]
# Values a tuned recipe may never set: the architecture, the training algorithm, the data (issue 13).
FORBIDDEN_KEYS = {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                  "norm_epsilon", "max_position_embeddings", "init_method_std", "rotary_base", "padded_vocab_size",
                  "lr", "min_lr", "lr_warmup_iters", "train_iters", "seed", "weight_decay", "adam_beta1",
                  "adam_beta2", "clip_grad", "eod_mask_loss", "data_split", "add_qkv_bias"}


def tuned(tmp_path: Path, **overrides: str):
    return make_config(tmp_path, PROFILE="tuned", **overrides)


# ---------------------------------------------------------------------------
# the config keys


def test_profile_keys_default_to_identical_and_reject_other_values(tmp_path):
    cfg = make_config(tmp_path)
    assert (cfg.profile, cfg.profile_fallback) == ("identical", None)
    assert make_config(tmp_path, PROFILE="Tuned", PROFILE_FALLBACK="IDENTICAL").profile_fallback == "identical"
    with pytest.raises(ConfigError, match=r"PROFILE='best': allowed values are identical, tuned"):
        make_config(tmp_path, PROFILE="best")
    with pytest.raises(ConfigError, match=r"PROFILE_FALLBACK='tuned': allowed values are identical"):
        make_config(tmp_path, PROFILE_FALLBACK="tuned")


def test_identical_is_the_configuration_unchanged(tmp_path):
    cfg = make_config(tmp_path)
    for platform, framework in JOBS:
        assert apply_profile(cfg, platform, framework, "llama") == (cfg, IDENTICAL)
    assert IDENTICAL.block() is None and IDENTICAL.settings == {} and IDENTICAL.env == {}


# ---------------------------------------------------------------------------
# the tables


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.id)
def test_every_value_has_a_pinned_source_and_none_changes_the_model(recipe: Recipe):
    for setting in (*recipe.settings, *recipe.env):
        source = setting.source
        assert source.repository.count("/") == 1 and source.path and source.version, setting
        assert source.version != "main" and source.cite().startswith(source.repository), setting
    keys = {s.key for s in recipe.settings}
    assert keys.isdisjoint(FORBIDDEN_KEYS), keys & FORBIDDEN_KEYS
    assert set(WORKLOAD_FIELDS) <= keys  # the whole batch and layout, never half config.env's
    for item in recipe.not_taken:
        assert item.reason and item.source.version


def test_the_vendor_sources_are_the_images_versions():
    """NeMo v2.3.0 is the NeMo of nvcr.io/nvidia/nemo:25.04, Primus v0.5.0 that of rocm/primus:v25.11."""
    nvidia = {s.source.repository: s.source.version for s in nvd.LLAMA3_8B_H100.settings}
    assert nvidia["NVIDIA/NeMo"] == "v2.3.0"
    for recipe in (amd.LLAMA31_8B_MI300X, amd.QWEN25_7B_MI300X):
        assert {s.source.version for s in recipe.settings} == {"v0.5.0"}
        assert all(s.source.path.startswith(("examples/megatron/configs/MI300X/", "primus/configs/"))
                   or s.fp8 for s in recipe.settings)


def test_available_recipes_are_listed_by_platform_and_framework():
    text = available()
    assert text == "nvd mega|nemo: llama, qwen (llama's); amd mega|prim: llama, qwen"


# ---------------------------------------------------------------------------
# applying a recipe


@pytest.mark.parametrize("fp8", ["false", "true"])
@pytest.mark.parametrize("model", ["llama", "qwen"])
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_every_vendor_job_has_a_tuned_configuration(tmp_path, platform, framework, model, fp8):
    cfg, profile = apply_profile(tuned(tmp_path, FP8=fp8), platform, framework, model)
    assert profile.tuned and cfg.profile == "tuned" and cfg.fp8 == (fp8 == "true")
    assert cfg.world_size == 8 and cfg.gbs == cfg.mbs * cfg.dp * cfg.ga
    recipe = profile.recipe
    assert recipe.platform == platform and framework in recipe.frameworks
    stated = {s.key: s.value for s in recipe.settings if s.applies(framework, cfg.fp8)}
    assert (cfg.sl, cfg.mbs, cfg.gbs, cfg.tp, cfg.pp, cfg.cp) == tuple(
        stated[key] for key in ("seq_length", "micro_batch_size", "global_batch_size", "tensor_model_parallel_size",
                                "pipeline_model_parallel_size", "context_parallel_size"))
    assert profile.settings == {k: v for k, v in stated.items() if k not in WORKLOAD_FIELDS}
    assert ("fp8_param_gather" in profile.settings) == cfg.fp8
    assert ("enable_primus_turbo" in profile.settings) == (framework == "prim")
    # every setting is rendered with its source, every difference recorded for the result
    rendered = "\n".join(profile.render())
    for setting in recipe.settings:
        if setting.applies(framework, cfg.fp8):
            assert setting.source.cite() in rendered
    block = profile.block()
    assert block.recipe == recipe.id and block.env == profile.env
    assert all(s.identical != s.tuned for s in block.settings)


def test_nvidia_llama_recipe_is_nemos_h100_performance_configuration(tmp_path):
    cfg, profile = apply_profile(tuned(tmp_path), "nvd", "nemo", "llama")
    # model_configs_h100.csv: 8 GPUs, SL 8192, TP 1, PP 1, CP 2, MBS 1, GBS 128 -> DP 4, GA 32
    assert (cfg.sl, cfg.mbs, cfg.gbs, cfg.tp, cfg.pp, cfg.cp, cfg.dp, cfg.ga) == (8192, 1, 128, 1, 1, 2, 4, 32)
    assert profile.settings["overlap_grad_reduce"] is True and profile.settings["overlap_param_gather"] is True
    assert profile.settings["manual_gc_interval"] == 100 and profile.settings["cross_entropy_fusion_impl"] == "te"
    assert profile.env == {"NVTE_FWD_LAYERNORM_SM_MARGIN": "16", "NVTE_BWD_LAYERNORM_SM_MARGIN": "16",
                           "NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
                           "TORCH_NCCL_AVOID_RECORD_STREAMS": "1"}
    assert profile.borrowed is None


def test_qwen_on_nvidia_runs_the_llama_recipe_and_says_so(tmp_path):
    _, profile = apply_profile(tuned(tmp_path), "nvd", "mega", "qwen")
    assert profile.recipe is nvd.LLAMA3_8B_H100 and profile.borrowed.from_model == "llama"
    assert profile.block().borrowed_from == "llama"
    assert any("no Qwen 2.5 7B performance recipe" in note for note in profile.notes)


def test_amd_recipes_are_primus_mi300x_examples(tmp_path):
    cfg, profile = apply_profile(tuned(tmp_path), "amd", "prim", "llama")
    assert (cfg.sl, cfg.mbs, cfg.gbs, cfg.dp, cfg.ga) == (8192, 2, 128, 8, 8)
    assert profile.settings["enable_primus_turbo"] is True and profile.settings["use_turbo_attention"] is False
    cfg, profile = apply_profile(tuned(tmp_path), "amd", "prim", "qwen")
    assert (cfg.sl, cfg.mbs, cfg.gbs, cfg.dp, cfg.ga) == (2048, 10, 640, 8, 8)
    assert profile.settings["use_turbo_attention"] is True
    _, mega = apply_profile(tuned(tmp_path), "amd", "mega", "qwen")
    assert "enable_primus_turbo" not in mega.settings
    assert any(note.startswith("enable_primus_turbo: prim only") for note in mega.notes)
    assert mega.env["HSA_NO_SCRATCH_RECLAIM"] == "0"


def test_identical_values_shown_beside_the_recipes(tmp_path):
    _, profile = apply_profile(tuned(tmp_path), "nvd", "mega", "llama")
    rows = {row.key: row for row in profile.rows}
    assert (rows["overlap_grad_reduce"].identical, rows["overlap_grad_reduce"].tuned) == (
        FIXED["overlap_grad_reduce"], True)
    assert (rows["attention_backend"].identical, rows["attention_backend"].tuned) == ("fused", "auto")
    assert (rows["SL"].identical, rows["SL"].tuned) == (2048, 8192)
    assert not rows["MBS"].differs and rows["DP"].differs
    _, fp8 = apply_profile(tuned(tmp_path, FP8="true"), "amd", "mega", "llama")
    fp8_rows = {row.key: row for row in fp8.rows}
    assert fp8_rows["fp8_amax_history_len"].identical == FP8_FIXED["fp8_amax_history_len"]
    assert not fp8_rows["fp8_param_gather"].differs  # Primus keeps FP8 parameter gather off, as identical


# ---------------------------------------------------------------------------
# bad input


def test_no_recipe_is_an_error_naming_what_exists(tmp_path):
    with pytest.raises(ProfileError) as caught:
        apply_profile(tuned(tmp_path), "nvd", "tran", "llama")
    text = str(caught.value)
    assert "no vendor recipe for llama with tran on nvd" in text
    assert "tuned recipes exist for nvd mega|nemo: llama, qwen (llama's); amd mega|prim: llama, qwen" in text
    assert "PROFILE_FALLBACK=identical" in text
    with pytest.raises(ProfileError, match="no vendor recipe for llama with tran on cpu"):
        apply_profile(tuned(tmp_path, DP="1", GPUS_PER_NODE="1"), "cpu", "tran", "llama")


def test_fallback_runs_identical_and_says_why(tmp_path):
    cfg = tuned(tmp_path, PROFILE_FALLBACK="identical")
    ran, profile = apply_profile(cfg, "amd", "tran", "qwen")
    assert ran.profile == "identical" and (ran.sl, ran.gbs) == (cfg.sl, cfg.gbs)
    assert profile.requested == "tuned" and not profile.tuned and "no vendor recipe for qwen" in profile.fallback
    block = profile.block()
    assert (block.requested, block.recipe, block.fallback) == ("tuned", None, profile.fallback)
    assert profile.render()[0].startswith("PROFILE=tuned requested; the identical profile runs")
    # a job with a recipe still runs it
    assert apply_profile(cfg, "amd", "prim", "qwen")[1].tuned


def test_a_precision_no_recipe_states_is_an_error(tmp_path):
    with pytest.raises(ProfileError, match=r"states bf16, fp8, not fp16"):
        apply_profile(tuned(tmp_path, PRECISION="fp16"), "nvd", "nemo", "llama")


@pytest.mark.parametrize(("overrides", "key", "detail"), [
    ({"GPUS_PER_NODE": "6", "DP": "6"}, "global_batch_size", "128 is not divisible by micro_batch_size x DP = 1 x 3"),
    ({"GPUS_PER_NODE": "3", "DP": "3"}, "tensor_model_parallel_size", "does not divide the world size"),
])
def test_a_recipe_that_does_not_fit_the_node_names_the_recipe_and_the_key(tmp_path, overrides, key, detail):
    with pytest.raises(ProfileError) as caught:
        apply_profile(tuned(tmp_path, **overrides), "nvd", "mega", "llama")
    assert str(caught.value).startswith(f"recipe {nvd.LLAMA3_8B_H100.id} does not fit this node: {key}: ")
    assert detail in str(caught.value)


def _with_recipe(monkeypatch, model: str, **changes):
    """The NVIDIA table with one model's recipe changed (a recipe that cannot fit)."""
    recipe = nvd.LLAMA3_8B_H100
    settings = [s for s in recipe.settings if s.key not in changes]
    source = Source("example/repo", "path", "v1")
    settings += [Setting(key, value, source) for key, value in changes.items()]
    changed = dataclasses.replace(recipe, settings=tuple(settings))
    monkeypatch.setitem(TABLES, "nvd", VendorTable("nvd", {model: changed}))


@pytest.mark.parametrize(("model", "changes", "key", "detail"), [
    ("llama", {"sequence_parallel": True}, "sequence_parallel", "needs tensor_model_parallel_size > 1"),
    ("llama", {"context_parallel_size": 4, "seq_length": 8196}, "context_parallel_size",
     "CP=4 needs seq_length divisible by 2 x CP = 8, got 8196"),
    ("qwen", {"tensor_model_parallel_size": 8, "context_parallel_size": 1}, "tensor_model_parallel_size",
     "TP=8 does not divide Qwen 2.5 7B's 28 heads and 4 query groups"),
    ("qwen", {"pipeline_model_parallel_size": 8, "context_parallel_size": 1, "global_batch_size": 8},
     "pipeline_model_parallel_size", "PP=8 does not divide 28 layers"),
    ("llama", {"seq_length": 262144, "context_parallel_size": 1}, "seq_length",
     "262144 exceeds Llama 3.1 8B's 131072 positions"),
])
def test_layout_checks_name_the_recipe_and_the_key(tmp_path, monkeypatch, model, changes, key, detail):
    _with_recipe(monkeypatch, model, **changes)
    with pytest.raises(ProfileError) as caught:
        apply_profile(tuned(tmp_path), "nvd", "nemo", model)
    assert str(caught.value).startswith(f"recipe {nvd.LLAMA3_8B_H100.id} does not fit this node: {key}: ")
    assert detail in str(caught.value)


def test_find_recipe_is_the_lookup_the_launchers_share():
    recipe, borrowed = find_recipe("amd", "mega", "qwen", "bf16")
    assert recipe is amd.QWEN25_7B_MI300X and borrowed is None
    with pytest.raises(ProfileError, match="no vendor recipe for mistral"):
        find_recipe("amd", "prim", "mistral", "bf16")


def test_cli_prints_every_vendor_job_or_names_the_problem(capsys, monkeypatch, tmp_path):
    from train.profiles.__main__ import main

    monkeypatch.setattr("train.profiles.__main__.load_config", lambda: make_config(tmp_path))
    assert main([]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("==")] == [
        "== nvd mega llama", "== nvd nemo llama", "== nvd mega qwen", "== nvd nemo qwen",
        "== amd mega llama", "== amd prim llama", "== amd mega qwen", "== amd prim qwen"]
    assert main(["--framework", "tran"]) == 2
    assert capsys.readouterr().err.strip() == "train.profiles: no vendor recipe for */tran/*"
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0


def test_amd_qwen_lists_its_lr_decay_iters_as_not_taken():
    """Primus's MI300X Qwen example decays the LR over 320000 iterations; tuned keeps LR_DECAY_ITERS = TRAIN_ITERS."""
    (item,) = [i for i in amd.QWEN25_7B_MI300X.not_taken if i.key == "lr_decay_iters"]
    assert item.value == 320000 and "TRAIN_ITERS" in item.reason
    assert item.source.path == amd.QWEN_EXP and item.source.version == "v0.5.0"
    assert not [i for i in amd.LLAMA31_8B_MI300X.not_taken if i.key == "lr_decay_iters"]  # its example says null
