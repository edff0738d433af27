"""PROFILE=tuned through the vendor launchers: dry runs, generated configurations, preflight, result.

One dry run per platform goes through ``train/train_<platform>_<framework>_<model>.sh`` exactly as a
user types it; the others call the ``train.launch.launcher.main`` that script execs, in the test process with
the script's environment and working folder, so megatron-core and transformers (which every dry run
imports for the sample digest and the padded vocabulary) are imported once, not once a case (issue 20:
the suite's time). The preflight runs against the recording stand-ins of tests/fakes/ (the real
Megatron-LM, Primus and NeMo judge the same plans in tests/conformance/).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.helpers.megatron import make_config, parse_flags
from tests.helpers.nemo import make_dataset_stub, make_tokenizer
from tests.helpers.preflight import use_fakes
from tests.helpers.shell import REPO, clean_env, run_script
from train.launch import preflight as pf
from train.launch.context import job_context, load_plugin
from train.launch.contract import LaunchPlan
from train.launch.launcher import launch
from train.launch.launcher import main as launch_main
from train.profiles import apply_profile
from utils.measure.memory import megatron_recipe
from utils.result.file import read_result

JOBS = [("nvd", "mega"), ("nvd", "nemo"), ("amd", "mega"), ("amd", "prim")]
# The dry runs that go through the user's script, one per platform; the rest run train.launch.launcher.main in-process.
THROUGH_THE_SCRIPT = {("nvd", "nemo", "llama"), ("amd", "prim", "qwen")}


def _data(cfg) -> None:
    for model in ("llama", "qwen"):
        make_tokenizer(cfg.data_dir / "tokenizers" / f"sample-{model}", 300)
        make_dataset_stub(cfg.data_dir / f"sample-{model}_text_document")


@pytest.fixture
def workspace(tmp_path):
    cfg = make_config(tmp_path, DATASET="sample")
    _data(cfg)
    return cfg


@pytest.mark.parametrize("model", ["llama", "qwen"])
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_dry_run_script_shows_every_tuned_setting_with_its_source(tmp_path, workspace, monkeypatch, capsys,
                                                                  platform, framework, model):
    env = clean_env(tmp_path, PROFILE="tuned", DATASET="sample", DATA_DIR=str(workspace.data_dir),
                    OUTPUT_DIR=str(workspace.output_dir))
    if (platform, framework, model) in THROUGH_THE_SCRIPT:
        proc = run_script(REPO, f"train/train_{platform}_{framework}_{model}.sh", "--dry-run", env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = proc.stdout
    else:  # what train/launch/launch.sh execs, with its environment and working folder
        for key in list(os.environ):
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(REPO)
        code = launch_main(["--platform", platform, "--framework", framework, "--model", model, "--dry-run"])
        out, err = capsys.readouterr()
        assert code == 0, err[-3000:]
    _, profile = apply_profile(replace(workspace, profile="tuned"), platform, framework, model)
    section = out[out.index("\n# profile\n"):]
    assert f"# tuned: {profile.recipe.title} [{profile.recipe.id}]" in section
    for setting in profile.recipe.settings:
        if setting.applies(framework, False):
            assert setting.source.cite() in section, setting.key
    for item in profile.recipe.not_taken:
        assert f"# not taken {item.key} = " in section
    for key, value in profile.env.items():
        assert f"\n{key}={value}\n" in out  # exported by the plan, not only listed


def test_megatron_argv_carries_the_nvidia_recipe(workspace):
    ctx = job_context(replace(workspace, profile="tuned", fp8=True), "nvd", "mega", "llama", dry_run=True)
    plan = load_plugin("mega").plan(ctx)
    flags = parse_flags(plan.argv[plan.argv.index(next(w for w in plan.argv if w.endswith("pretrain_gpt.py"))) + 1:])
    assert flags["--seq-length"] == ["8192"] and flags["--micro-batch-size"] == ["1"]
    assert flags["--global-batch-size"] == ["128"] and flags["--context-parallel-size"] == ["2"]
    for switch in ("--overlap-grad-reduce", "--overlap-param-gather", "--ddp-average-in-collective", "--manual-gc",
                   "--fp8-param-gather", "--grad-reduce-in-bf16"):
        assert flags[switch] == [], switch
    assert flags["--manual-gc-interval"] == ["100"] and flags["--ddp-bucket-size"] == ["134217728"]
    assert flags["--cross-entropy-fusion-impl"] == ["te"] and flags["--attention-backend"] == ["auto"]
    assert flags["--fp8-format"] == ["hybrid"]
    assert (plan.env["NVTE_FLASH_ATTN"], plan.env["NVTE_FUSED_ATTN"]) == ("1", "1")
    assert plan.env["NVTE_FWD_LAYERNORM_SM_MARGIN"] == "16" and plan.env["NCCL_NVLS_ENABLE"] == "0"


def test_primus_experiment_carries_the_amd_recipe(workspace):
    ctx = job_context(replace(workspace, profile="tuned"), "amd", "prim", "qwen", dry_run=True)
    plan = load_plugin("prim").plan(ctx)
    (path, text), = plan.files.items()
    overrides = yaml.safe_load(text)["modules"]["pre_trainer"]["overrides"]
    assert (overrides["seq_length"], overrides["micro_batch_size"], overrides["global_batch_size"]) == (2048, 10, 640)
    assert overrides["overlap_grad_reduce"] is True and overrides["overlap_param_gather"] is True
    assert overrides["enable_primus_turbo"] is True and overrides["use_turbo_attention"] is True
    assert overrides["gradient_accumulation_fusion"] is False
    assert plan.env["HSA_NO_SCRATCH_RECLAIM"] == "0" and plan.env["TE_HIPBLASLT_TUNING_RUN_COUNT"] == "10"
    assert path.name == "train_amd_prim_qwen_tuned.primus.yaml"


def test_mega_on_amd_takes_the_recipe_without_primus_turbo(workspace):
    ctx = job_context(replace(workspace, profile="tuned"), "amd", "mega", "llama", dry_run=True)
    argv = load_plugin("mega").plan(ctx).argv
    assert "--overlap-grad-reduce" in argv and not any("turbo" in word for word in argv)
    assert argv[argv.index("--micro-batch-size") + 1] == "2"


def test_nemo_overrides_carry_the_nvidia_recipe(workspace):
    ctx = job_context(replace(workspace, profile="tuned", fp8=True), "nvd", "nemo", "qwen", dry_run=True)
    plan = load_plugin("nemo").plan(ctx)
    fields = json.loads(next(iter(plan.files.values())))["fields"]
    ddp = fields["trainer.strategy.ddp"]
    assert (ddp["overlap_grad_reduce"], ddp["overlap_param_gather"], ddp["average_in_collective"]) == (True,) * 3
    assert ddp["bucket_size"] == 134217728 and ddp["grad_reduce_in_fp32"] is False
    assert fields["trainer.strategy.context_parallel_size"] == 2 and fields["data"]["seq_length"] == 8192
    assert fields["data"]["global_batch_size"] == 128 and fields["model.config.cross_entropy_fusion_impl"] == "te"
    assert fields["model.config.attention_backend"]["name"] == "auto"
    assert fields["trainer.plugins.fp8_param_gather"] is True
    callbacks = fields["trainer.callbacks"]
    assert [c["_target_"].rsplit(".", 1)[1] for c in callbacks] == ["TimingCallback", "GarbageCollectionCallback"]
    assert callbacks[1]["gc_interval_train"] == 100 and callbacks[1]["gc_interval_val"] == 100
    assert plan.env["NVTE_BWD_LAYERNORM_SM_MARGIN"] == "16"


def test_identical_plans_are_unchanged_by_the_profile_code(workspace):
    ctx = job_context(workspace, "nvd", "mega", "llama", dry_run=True)
    plan = load_plugin("mega").plan(ctx)
    assert "--overlap-grad-reduce" not in plan.argv and "--manual-gc" not in plan.argv
    assert plan.argv[plan.argv.index("--attention-backend") + 1] == "fused"
    assert "NVTE_FWD_LAYERNORM_SM_MARGIN" not in plan.env and not ctx.result_path.name.endswith("_tuned.json")


# ---------------------------------------------------------------------------
# preflight: the expected settings of a tuned job are the recipe's


@pytest.mark.parametrize("fp8", ["false", "true"])
@pytest.mark.parametrize("model", ["llama", "qwen"])
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_tuned_jobs_pass_the_preflight_with_the_recipes_values(tmp_path, monkeypatch, platform, framework, model,
                                                                fp8):
    cfg, _ = use_fakes(monkeypatch, tmp_path, PROFILE="tuned", FP8=fp8)
    ctx = job_context(cfg, platform, framework, model, dry_run=True)
    settings = pf.preflight(ctx, load_plugin(framework).plan(ctx)).settings
    for key, value in ctx.profile.settings.items():
        assert settings[key] == value, key
    assert settings["seq_length"] == ctx.cfg.sl and settings["global_batch_size"] == ctx.cfg.gbs


def test_a_tuned_setting_the_framework_does_not_run_is_reported_against_the_recipe(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path, PROFILE="tuned")
    ctx = job_context(cfg, "nvd", "mega", "llama", dry_run=True)
    plan = load_plugin("mega").plan(ctx)
    plan = replace(plan, argv=[word for word in plan.argv if word != "--overlap-param-gather"])
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert (caught.value.setting, caught.value.expected, caught.value.effective) == ("overlap_param_gather", True,
                                                                                       False)
    assert f"the tuned recipe {ctx.profile.recipe.id}" in str(caught.value)


def test_preflight_cli_applies_the_profile(tmp_path, monkeypatch, capsys):
    cfg, _ = use_fakes(monkeypatch, tmp_path, PROFILE="tuned")
    monkeypatch.setattr(pf, "load_config", lambda: cfg)
    assert pf.main(["--platform", "amd", "--framework", "prim", "--model", "qwen", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["settings"]["micro_batch_size"] == 10 and record["settings"]["enable_primus_turbo"] is True
    monkeypatch.setattr(pf, "load_config", lambda: replace(cfg, profile_fallback=None))
    assert pf.main(["--platform", "amd", "--framework", "tran", "--model", "qwen"]) == 2
    assert "no vendor recipe for qwen with tran on amd" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# the result


def test_the_result_records_the_profile_and_what_it_changed(tmp_path):
    cfg = make_config(tmp_path, PROFILE="tuned")
    ctx = job_context(cfg, "nvd", "mega", "qwen")
    plugin = SimpleNamespace(plan=lambda ctx: LaunchPlan(argv=[sys.executable, "-c", "raise SystemExit(3)"]),
                             collect=lambda ctx, plan, rc: None, preflight=None,  # the standard preflight
                             memory=lambda ctx, plan: megatron_recipe("mega"))
    assert launch(ctx, plugin) == 1
    assert ctx.result_path.name == "train_nvd_mega_qwen_tuned.json" and ctx.log_path.name.endswith("_tuned.log")
    result = read_result(ctx.result_path)
    assert result.status == "failed" and result.profile == "tuned"
    block = result.profile_settings
    assert block.recipe == ctx.profile.recipe.id and block.borrowed_from == "llama"
    assert {s.key for s in block.settings} >= {"SL", "GBS", "CP", "overlap_grad_reduce", "attention_backend"}
    assert result.training_config.workload.SL == 8192 and result.training_config.workload.CP == 2


def test_the_cli_refuses_tuned_without_a_recipe_and_falls_back_when_told(tmp_path):
    env = clean_env(tmp_path, PROFILE="tuned", OUTPUT_DIR=str(tmp_path / "out"), DP="1", GPUS_PER_NODE="1",
                    MODEL_SIZE="tiny", DATASET="sample")
    argv = ["-m", "train.launch", "--platform", "cpu", "--framework", "tran", "--model", "llama", "--dry-run"]
    import subprocess

    proc = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("tprimat: PROFILE=tuned: no vendor recipe for llama")
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, env={**env, "PROFILE_FALLBACK": "identical"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "# PROFILE=tuned requested; the identical profile runs (PROFILE_FALLBACK=identical)" in proc.stdout


def test_jobs_list_names_each_result_by_the_profile_it_runs(tmp_path):
    from train.launch.jobs import plan_jobs

    cfg = make_config(tmp_path, PROFILE="tuned", PROFILE_FALLBACK="identical", FRAMEWORK="all")
    names = {job.framework: Path(job.result).name for job in plan_jobs(cfg, "amd")[0] if job.model == "qwen"}
    assert names == {"mega": "train_amd_mega_qwen_tuned.json", "prim": "train_amd_prim_qwen_tuned.json",
                     "tran": "train_amd_tran_qwen.json", "deep": "train_amd_deep_qwen.json"}
