"""PROFILE=mlperf (issue 35): MLPerf's Llama 3.1 8B rules as config values, cited, on every platform and framework.

The values are checked here against the pinned mlperf-logging's own rules files (the checker's
``closed_llama31_8b.yaml`` and the reference convergence points), which the venv carries; against
the mlcommons/training reference and the rules text in tests/conformance/test_conformance_mlperf.py,
which needs those trees. The dry run of every job goes through ``train.launch.launcher.main``.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import resources

import pytest
import yaml

from tests.helpers.megatron import make_config
from tests.helpers.nemo import make_dataset_stub, make_tokenizer
from tests.helpers.shell import REPO, clean_env
from train.launch.context import job_context, load_plugin
from train.launch.launcher import main as launch_main
from train.profiles import ProfileError, apply_profile, mlperf
from train.rules.schedule import lr_at
from utils.result.file import result_path
from utils.spec.registry import FRAMEWORKS

ALL_JOBS = [(platform, framework) for framework, spec in FRAMEWORKS.items() for platform in spec.platforms]


def mlperf_config(tmp_path, **overrides: str):
    return make_config(tmp_path, PROFILE="mlperf", DATASET="sample", **overrides)


def test_the_profile_is_a_config_choice_and_names_its_results(tmp_path):
    assert mlperf_config(tmp_path).profile == "mlperf"
    path = result_path(tmp_path, "nvd", "mega", "llama", None, "mlperf")
    assert path.name == "train_nvd_mega_llama_mlperf.json"


@pytest.mark.parametrize(("platform", "framework"), ALL_JOBS)
def test_every_framework_runs_the_same_rules(tmp_path, platform, framework):
    cfg, profile = apply_profile(mlperf_config(tmp_path), platform, framework, "llama")
    assert (cfg.sl, cfg.gbs, cfg.ga, cfg.mbs, cfg.dp) == (8192, 32, 4, 1, 8)
    assert (cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.lr_decay, cfg.decay_iters) == (8e-4, 8e-5, 128, "cosine",
                                                                                      1_200_000)
    assert (cfg.beta1, cfg.beta2, cfg.adam_eps, cfg.weight_decay, cfg.grad_clip, cfg.init_std) == (
        0.9, 0.95, 1e-5, 0.1, 1.0, 0.02)
    assert (cfg.eval_interval, cfg.eval_samples, cfg.target_loss, cfg.stop_at_target) == (12288, 1024, 3.3, True)
    assert cfg.train_iters == 10  # the run's step budget stays config.env's
    assert profile.name == "mlperf" and profile.settings == {} and profile.env == {}  # no framework setting changes
    block = profile.block()
    assert block.requested == "mlperf" and block.recipe == mlperf.RECIPE.id
    assert {s.key for s in block.settings} >= {"SL", "GBS", "LR", "ADAM_EPS", "LR_DECAY_ITERS", "TARGET_LOSS"}


def test_every_value_cites_a_pinned_source():
    for value in mlperf.VALUES:
        assert value.sources, value.key
        for source in value.sources:
            assert source.version in (mlperf.REF_COMMIT, mlperf.RULES_COMMIT, mlperf.LOGGING_TAG, mlperf.NEMO_TAG)
            assert "line" in source.where, (value.key, source.where)


def test_checked_values_are_what_the_pinned_checker_enforces():
    rules = yaml.safe_load(resources.files("mlperf_logging").joinpath(
        "compliance_checker/training_6.0.0/closed_llama31_8b.yaml").read_text())
    checks = {item["KEY"]["NAME"]: str(item["KEY"].get("CHECK", "")) + str(item["KEY"].get("ATLEAST_ONE_CHECK", ""))
              for item in rules if "KEY" in item}
    assert "== 8192" in checks["max_sequence_length"] and mlperf.value_of("sl") == 8192
    assert "== 1024" in checks["eval_samples"] and mlperf.value_of("eval_samples") == 1024
    assert "== 1200000" in checks["max_steps"] and mlperf.value_of("lr_decay_iters") == 1_200_000
    assert "<= 3.3" in checks["eval_accuracy"] and mlperf.value_of("target_loss") == 3.3
    assert "0.9" in checks["opt_adamw_beta_1"] and "0.95" in checks["opt_adamw_beta_2"]
    assert "1e-05" in checks["opt_adamw_epsilon"] and mlperf.value_of("adam_eps") == 1e-5
    assert "0.1" in checks["opt_adamw_weight_decay"] and "1.0" in checks["opt_gradient_clip_norm"]
    assert "cosine with linear warmup" in checks["opt_learning_rate_decay_schedule"]


def test_gbs_lr_and_warm_up_are_the_gbs_32_reference_convergence_point():
    points = json.loads(resources.files("mlperf_logging").joinpath(
        "rcp_checker/training_6.0.0/rcps_llama31_8b.json").read_text())
    point = points["llama31_8b_ref_32"]
    assert point["BS"] == mlperf.value_of("gbs") == 32
    assert point["Hyperparams"]["opt_base_learning_rate"] == mlperf.value_of("lr")
    assert point["Hyperparams"]["opt_learning_rate_warmup_samples"] == mlperf.value_of("warmup_steps") * 32
    assert mlperf.value_of("min_lr") == pytest.approx(0.1 * mlperf.value_of("lr"))


def test_the_cosine_runs_over_1_2_million_steps_whatever_the_budget(tmp_path):
    cfg, _ = apply_profile(mlperf_config(tmp_path, TRAIN_ITERS="6000"), "nvd", "mega", "llama")
    assert lr_at(128, cfg) == pytest.approx(8e-4)
    assert lr_at(5999, cfg) > 0.9999 * 8e-4  # still at the top of a 1.2M-step cosine
    assert lr_at(1_200_000, cfg) == pytest.approx(8e-5)


def test_nemo_says_its_schedule_ends_at_the_trainers_max_steps(tmp_path):
    _, profile = apply_profile(mlperf_config(tmp_path), "nvd", "nemo", "llama")
    assert profile.notes[0] == mlperf.NEMO_HORIZON
    _, profile = apply_profile(mlperf_config(tmp_path, TRAIN_ITERS="1200000"), "nvd", "nemo", "llama")
    assert mlperf.NEMO_HORIZON not in profile.notes


def test_other_models_and_layouts_that_miss_gbs_32_are_refused(tmp_path):
    with pytest.raises(ProfileError, match=r"rules are for Llama 3.1 8B \(MODELS=llama\); qwen has none"):
        apply_profile(mlperf_config(tmp_path), "nvd", "mega", "qwen")
    cfg = mlperf_config(tmp_path, MBS="3", GA="1", DP="8")
    with pytest.raises(ProfileError, match=r"GBS 32 \(the RCP point\) is not divisible by MBS x DP = 3 x 8 = 24"):
        apply_profile(cfg, "nvd", "mega", "llama")


def test_a_short_budget_is_said_and_precision_is_declared(tmp_path):
    _, profile = apply_profile(mlperf_config(tmp_path, FP8="true"), "nvd", "mega", "llama")
    text = "\n".join(profile.render())
    assert text.startswith(f"mlperf: {mlperf.RECIPE.title} [{mlperf.RECIPE.id}]")
    assert "TRAIN_ITERS=10 x GBS 32 = 320 samples, below the 173650" in text and ">= 5427" in text
    assert "declared PRECISION = bf16+fp8" in text and "MLPerf allows fp32, bf16, fp16 and fp8" in text


def test_a_tiny_model_keeps_its_workload_and_says_it_is_not_mlperf(tmp_path):
    cfg = mlperf_config(tmp_path, MODEL_SIZE="tiny", SL="128", MBS="1", DP="1", GA="4", GPUS_PER_NODE="1",
                        EVAL_INTERVAL="8", EVAL_SAMPLES="4")
    new, profile = apply_profile(cfg, "cpu", "tran", "llama")
    assert (new.sl, new.gbs, new.eval_interval) == (128, 4, 8)
    assert (new.eval_samples, new.target_loss, new.adam_eps, new.decay_iters) == (1024, 3.3, 1e-5, 1_200_000)
    assert "MODEL_SIZE=tiny is not MLPerf's model" in profile.notes[0]


@pytest.fixture
def workspace(tmp_path):
    cfg = mlperf_config(tmp_path)
    make_tokenizer(cfg.data_dir / "tokenizers" / "sample-llama", 300)
    make_dataset_stub(cfg.data_dir / "sample-llama_text_document")
    return cfg


def test_megatron_and_nemo_plans_carry_the_rules(workspace):
    ctx = job_context(workspace, "nvd", "mega", "llama", dry_run=True)
    argv = load_plugin("mega").plan(ctx).argv
    flag = {word: argv[i + 1] for i, word in enumerate(argv[:-1]) if word.startswith("--")}
    assert (flag["--seq-length"], flag["--global-batch-size"], flag["--lr"]) == ("8192", "32", "0.0008")
    assert (flag["--lr-decay-iters"], flag["--lr-warmup-iters"], flag["--adam-eps"]) == ("1200000", "128", "1e-05")
    ctx = job_context(replace(workspace), "nvd", "nemo", "llama", dry_run=True)
    fields = json.loads(next(iter(load_plugin("nemo").plan(ctx).files.values())))["fields"]
    assert fields["optim.config.adam_eps"] == 1e-5 and fields["optim.lr_scheduler"]["max_steps"] == 1_200_000


@pytest.mark.parametrize(("platform", "framework"), ALL_JOBS)
def test_dry_run_of_every_job_shows_the_rules_with_their_sources(tmp_path, workspace, monkeypatch, capsys,
                                                                 platform, framework):
    env = clean_env(tmp_path, PROFILE="mlperf", DATASET="sample", DATA_DIR=str(workspace.data_dir),
                    OUTPUT_DIR=str(workspace.output_dir))
    for key in list(os.environ):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO)
    code = launch_main(["--platform", platform, "--framework", framework, "--model", "llama", "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    section = out[out.index("\n# profile\n"):]
    assert f"# mlperf: {mlperf.RECIPE.title} [{mlperf.RECIPE.id}]" in section
    for value in mlperf.VALUES:
        assert value.cite() in section, value.key
