"""The preflight path (request, probe, answer, flat record, comparison) against the recording stand-ins.

The probes of train/settings/ run for real here, in this interpreter, against the stand-in
trees of tests/fakes/ (the real frameworks are judged by tests/conformance/). These tests
show that each job's generated configuration reaches the framework unchanged, that every
fairness setting is read back, and that a difference or a rejection stops the job with the
setting and both values named.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.megatron import make_context
from tests.helpers.preflight import FAKE_COMMIT, recorded, use_fakes
from train.launch import preflight as pf
from train.launch.context import load_plugin
from train.settings.expected import FIXED
from train.settings.platform_env import attention_env
from train.settings.runner import FrameworkUnavailable
from utils.config.model import REPO_ROOT
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape

JOBS = [("amd", "mega"), ("nvd", "mega"), ("amd", "prim"), ("nvd", "nemo")]


def _plan(cfg, platform: str, framework: str, model: str):
    ctx = make_context(cfg, platform, framework, model, dry_run=True)
    return ctx, load_plugin(framework).plan(ctx)


@pytest.mark.parametrize("model", ["llama", "qwen"])
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_every_vendor_job_passes_and_records_the_fairness_settings(tmp_path, monkeypatch, platform, framework, model):
    cfg, record = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, platform, framework, model)
    settings = pf.preflight(ctx, plan)
    assert isinstance(settings, EffectiveSettings) and settings.reason is None
    assert settings.env == plan.env
    values = settings.settings
    assert values["global_batch_size"] == cfg.gbs and values["train_iters"] == 20
    assert values["grad_reduce_in_fp32"] is False and values["use_distributed_optimizer"] is True
    assert values["num_workers"] == FIXED["num_workers"] and values["create_attention_mask"] is False
    assert values["attention_backend"] == {"nvd": "fused", "amd": "auto"}[platform]
    for fusion in ("bias_activation_fusion", "bias_dropout_fusion", "apply_rope_fusion", "persist_layer_norm",
                   "cross_entropy_loss_fusion", "masked_softmax_fusion", "attention_softmax_in_fp32"):
        assert values[fusion] is True, fusion
    assert values["checkpoint_interval"] is None and values["checkpoint_at_end"] is False
    assert values["cp_comm_type"] == "p2p"  # every stack's record says how CP communicates (issue 40)
    # the scaled init std read back from the framework's TransformerConfig (issue 23): 0.02 / sqrt(2 * layers)
    layers = values["num_layers"]
    assert values["output_layer_init_method_std"] == pytest.approx(cfg.init_std / math.sqrt(2 * layers), rel=1e-12)
    if framework == "mega":
        seen = recorded(record)
        # the framework parsed exactly the launcher's argv, under the launcher's NVTE switches
        assert seen["argv"] == plan.args_after("pretrain_gpt.py")
        switches = {k: v for k, v in seen["env"].items()
                    if k in ("NVTE_FLASH_ATTN", "NVTE_FUSED_ATTN", "NVTE_UNFUSED_ATTN")}
        assert switches == attention_env({"nvd": "fused", "amd": "auto"}[platform])
    if framework == "nemo":
        seen = recorded(record)
        assert seen["argv"][1:] == ["-m", "train.nemo.probe"]
        assert seen["request"]["world_size"] == cfg.world_size
    assert FAKE_COMMIT[:12] in settings.resolved_by or framework != "mega"


@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_fp8_with_tensor_and_context_parallelism(tmp_path, monkeypatch, platform, framework):
    cfg, _ = use_fakes(monkeypatch, tmp_path, FP8="true", TP="2", CP="2", DP="2", GA="32")
    settings = pf.preflight(*_plan(cfg, platform, framework, "llama")).settings
    assert settings["fp8"] == "hybrid" and settings["fp8_recipe"] == "delayed"
    assert settings["fp8_param_gather"] is False and settings["fp8_amax_history_len"] == 1024
    assert (settings["tensor_model_parallel_size"], settings["context_parallel_size"]) == (2, 2)
    assert settings["sequence_parallel"] is True and settings["data_parallel_size"] == 2


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
@pytest.mark.parametrize(("platform", "framework"), [("nvd", "mega"), ("nvd", "nemo")])
def test_other_precisions_reduce_in_their_own_dtype(tmp_path, monkeypatch, platform, framework, precision):
    cfg, _ = use_fakes(monkeypatch, tmp_path, PRECISION=precision)
    settings = pf.preflight(*_plan(cfg, platform, framework, "qwen")).settings
    assert settings["precision"] == precision and settings["grad_reduce_in_fp32"] is False


def test_tran_is_its_own_reference(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "nvd", "tran", "llama")
    settings = pf.preflight(ctx, plan)
    assert settings.resolved_by.startswith("tprimat itself")
    assert settings.settings["lr"] == cfg.lr and settings.settings["attention_backend"] == "sdpa"
    # What plain DDP does, stated where it differs from the fairness table (fp32 weights under autocast;
    # the bucketed all-reduce overlaps the backward on more than one rank)
    assert settings.settings["grad_reduce_in_fp32"] is True
    assert settings.settings["overlap_grad_reduce"] is (cfg.world_size > 1)


def test_deep_leaves_the_reduction_to_what_its_engine_reports(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    settings = pf.preflight(*_plan(cfg, "nvd", "deep", "llama")).settings
    assert "grad_reduce_in_fp32" not in settings and "overlap_grad_reduce" not in settings
    assert settings["zero_stage"] == cfg.zero_stage and settings["lr"] == cfg.lr


def test_bf16_without_bf16_reduction_is_caught_with_both_values(tmp_path, monkeypatch):
    """Megatron's validation turns bf16 gradient reduction into fp32 unless --grad-reduce-in-bf16 is given."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "nvd", "mega", "llama")
    plan = replace(plan, argv=[word for word in plan.argv if word != "--grad-reduce-in-bf16"])
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert (caught.value.setting, caught.value.expected, caught.value.effective) == ("grad_reduce_in_fp32", False, True)
    assert "grad_reduce_in_fp32=True" in str(caught.value) and "grad_reduce_in_fp32=False" in str(caught.value)


def test_nvte_switches_that_disagree_with_the_backend_stop_the_job(tmp_path, monkeypatch):
    """The first crash of issue 10: NVTE_FLASH_ATTN=1 with --attention-backend fused."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "nvd", "mega", "qwen")
    plan = replace(plan, env={**plan.env, "NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "1"})
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert caught.value.setting == "NVTE_FLASH_ATTN"
    assert "rejects the configuration" in str(caught.value) and "fused" in str(caught.value)


def test_nemo_plugin_that_resets_the_reduction_dtype_is_caught(tmp_path, monkeypatch):
    """The bf16 precision plugin sets ddp.grad_reduce_in_fp32 back to True unless its own field says False."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "nvd", "nemo", "qwen")
    (path, text), = plan.files.items()
    import json

    data = json.loads(text)
    del data["fields"]["trainer.plugins.grad_reduce_in_fp32"]
    plan = replace(plan, files={path: json.dumps(data)})
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert caught.value.setting == "grad_reduce_in_fp32" and caught.value.effective is True


@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_another_scaled_init_rule_is_caught_with_both_values(tmp_path, monkeypatch, platform, framework):
    """A stack whose TransformerConfig scales the projections differently (here megatron-core's hybrid-model
    multiplier, 1 instead of 2) would start from another initialisation: the preflight stops it (issue 23)."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    monkeypatch.setenv("TPRIMAT_FAKE_INIT_MULTIPLIER", "1")
    ctx, plan = _plan(cfg, platform, framework, "llama")
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    layers = workload_shape(cfg, "llama").num_layers
    assert caught.value.setting == "output_layer_init_method_std"
    assert caught.value.expected == pytest.approx(cfg.init_std / math.sqrt(2 * layers))
    assert caught.value.effective == pytest.approx(cfg.init_std / math.sqrt(layers))


@pytest.mark.parametrize("framework", ["mega", "prim"])
def test_a_transformer_config_that_cannot_be_built_leaves_the_init_unread(tmp_path, monkeypatch, framework):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    monkeypatch.setenv("TPRIMAT_FAKE_NO_CONFIG", "apply_rope_fusion is not available")
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(*_plan(cfg, "amd", framework, "qwen"))
    assert caught.value.setting == "output_layer_init_method_std"
    assert "not read: TransformerConfig not built (ValueError: apply_rope_fusion is not available)" in str(caught.value)


@pytest.mark.parametrize("framework", ["mega", "prim"])
def test_both_megatron_probes_build_the_config_with_the_fused_rope_stand_in(tmp_path, monkeypatch, framework):
    """Issue 40: on a host without the fused RoPE kernel the prim probe built the TransformerConfig bare, Megatron
    refused apply_rope_fusion and no init std was read (24 of 25 Primus conformance jobs failed); both probes now
    build it one way (train/settings/probe_common.py: build_transformer_config), the stand-in named."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    monkeypatch.setenv("TPRIMAT_FAKE_NO_FUSED_ROPE", "1")
    result = pf.preflight(*_plan(cfg, "amd", framework, "qwen"))
    layers = result.settings["num_layers"]
    assert result.settings["output_layer_init_method_std"] == pytest.approx(cfg.init_std / math.sqrt(2 * layers))
    assert "fused RoPE kernel" in result.resolved_by


def test_an_all_to_all_layout_transformer_engine_cannot_run_is_refused_before_launch(tmp_path, monkeypatch):
    """Issue 40, finding 5: all-to-all CP needs each rank's query and key/value heads divisible by CP (TE's
    assertion); Llama 3.1 8B's 8 groups at TP 8 leave one per rank, so TP 8 x CP 2 under a2a stops at the first
    attention call. The preflight refuses it, naming the layout; the table's p2p runs."""
    cfg, _ = use_fakes(monkeypatch, tmp_path, MODELS="llama", TP="8", CP="2", DP="1", NNODES="2", GA="8")
    ctx, plan = _plan(cfg, "nvd", "mega", "llama")
    assert pf.preflight(ctx, plan).settings["cp_comm_type"] == "p2p"
    flag = plan.argv.index("--cp-comm-type")
    a2a = replace(plan, argv=[*plan.argv[:flag + 1], "a2a", *plan.argv[flag + 2:]])
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, a2a)
    assert caught.value.setting == "cp_comm_type"
    assert "TP 8 x CP 2" in str(caught.value) and "attention.py:3057-3059" in str(caught.value)


def test_the_cp_layout_rule_reads_heads_per_rank() -> None:
    from train.rules.cp_comm import cp_layout_problem, effective_cp_comm_type

    layout = {"num_attention_heads": 32, "num_query_groups": 8, "tensor_model_parallel_size": 2,
              "context_parallel_size": 2}
    assert cp_layout_problem({**layout, "cp_comm_type": "a2a"}) is None  # 16 and 4 heads per rank split in 2
    assert cp_layout_problem({**layout, "cp_comm_type": "p2p", "tensor_model_parallel_size": 8}) is None
    assert "CP=2" in cp_layout_problem({**layout, "cp_comm_type": "a2a", "tensor_model_parallel_size": 8})
    assert [effective_cp_comm_type(v) for v in (None, ["p2p"], ["a2a", "a2a"], ["p2p", "a2a"])] == [
        "p2p", "p2p", "a2a", "p2p,a2a"]


def test_a_rejection_carries_the_frameworks_message(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    monkeypatch.setenv("TPRIMAT_FAKE_REJECT", "--context-parallel-size 2 needs --sequence-parallel")
    ctx, plan = _plan(cfg, "amd", "mega", "llama")
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert "needs --sequence-parallel" in str(caught.value) and caught.value.setting == "context_parallel_size"
    assert "\n" not in str(caught.value)


def test_a_tree_at_another_commit_names_megatron_ref(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    cfg = cfg.replace(megatron_ref="core_v0.12.0")
    ctx, plan = _plan(cfg, "nvd", "mega", "llama")
    with pytest.raises(FrameworkUnavailable, match=r"not MEGATRON_REF=core_v0\.12\.0"):
        pf.preflight(ctx, plan)


def test_missing_framework_pieces_are_one_line_messages(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    monkeypatch.setenv("TPRIMAT_MEGATRON_LM", str(tmp_path / "nowhere"))
    ctx, plan = _plan(cfg, "nvd", "mega", "llama")
    with pytest.raises(FrameworkUnavailable, match="MEGATRON_REF") as caught:
        pf.preflight(ctx, plan)
    assert "\n" not in str(caught.value)
    monkeypatch.setenv("TPRIMAT_NEMO_PYTHON", str(tmp_path / "no-python"))
    ctx, plan = _plan(cfg, "nvd", "nemo", "llama")
    with pytest.raises(FrameworkUnavailable, match="TPRIMAT_NEMO_PYTHON"):
        pf.preflight(ctx, plan)


def test_cli_exit_codes_and_json(tmp_path, monkeypatch, capsys):
    """``python -m train.launch.preflight``: the accepted job once as a user runs it (a fresh interpreter), the
    rejection, the missing framework and ``--help`` through the same ``main`` in this process (one interpreter
    fewer each: the probes they start are the same)."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    values = {"DATA_DIR": str(cfg.data_dir), "OUTPUT_DIR": str(cfg.output_dir), "DATASET": "sample",
              "MEGATRON_REF": FAKE_COMMIT, "TRAIN_ITERS": "20", "WARMUP_STEPS": "4"}
    env = {**os.environ, **values}
    arguments = ["--platform", "amd", "--framework", "prim", "--model", "qwen"]
    ok = subprocess.run([sys.executable, "-m", "train.launch.preflight", *arguments, "--json"], cwd=REPO_ROOT,
                        env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert EffectiveSettings.model_validate_json(ok.stdout).settings["dataloader_type"] == "single"
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TPRIMAT_FAKE_REJECT", "no")
    capsys.readouterr()
    assert pf.main(arguments) == 1
    err = capsys.readouterr().err
    assert "Primus rejects the configuration" in err and "Traceback" not in err
    monkeypatch.delenv("TPRIMAT_FAKE_REJECT")
    monkeypatch.setenv("TPRIMAT_PRIMUS", str(tmp_path / "none"))
    assert pf.main(arguments) == 2
    err = capsys.readouterr().err
    assert "Primus not found" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as done:
        pf.main(["--help"])
    assert done.value.code == 0 and "--framework" in capsys.readouterr().out


def test_the_record_is_only_scalars_and_sorted(tmp_path, monkeypatch):
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "nvd", "tran", "llama")
    plugin = load_plugin("tran")
    resolve = plugin.resolve

    def with_other_values(ctx, plan):
        resolution = resolve(ctx, plan)
        resolution.record.update({"zz_list": [1, 2], "aa_none": None, "dd_dict": {"x": 1}})
        return resolution

    monkeypatch.setattr(plugin, "resolve", with_other_values)
    settings = pf.preflight(ctx, plan).settings
    assert settings["aa_none"] is None and "zz_list" not in settings and "dd_dict" not in settings
    assert list(settings) == sorted(settings)


def test_each_generated_path_is_checked(tmp_path: Path, monkeypatch):
    """A plan without the generated Primus file cannot be judged: the preflight says what is missing."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    ctx, plan = _plan(cfg, "amd", "prim", "llama")
    with pytest.raises(pf.PreflightError, match="no generated"):
        pf.preflight(ctx, replace(plan, files={}))


def test_a_missing_module_is_an_unavailable_framework_not_a_rejection(tmp_path, monkeypatch):
    """Issue 21: ``No module named 'six'`` in the framework's Python was reported as Megatron-LM rejecting the job."""
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    arguments = Path(os.environ["TPRIMAT_MEGATRON_LM"]) / "megatron" / "training" / "arguments.py"
    arguments.write_text("import tprimat_no_such_module  # noqa: F401\n" + arguments.read_text(encoding="utf-8"),
                         encoding="utf-8")
    ctx, plan = _plan(cfg, "nvd", "mega", "llama")
    with pytest.raises(FrameworkUnavailable) as caught:
        pf.preflight(ctx, plan)
    message = str(caught.value)
    assert "module 'tprimat_no_such_module' is missing" in message and "rejects" not in message
    assert "\n" not in message
