"""The nemo launcher: train/nemo/plugin.py's plan and collect, train/nemo/entry.py's override application."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.nemo import REPO, make_tokenizer, nemo_environ, write_config
from train.launch.context import log_path_for
from train.launch.contract import RunContext
from train.nemo import entry as nemo_entry
from train.nemo import plugin as nemo_plugin
from train.nemo.recipe import NemoOverrides
from utils.config.load import load_config
from utils.dataset.paths import job_data, tokenizer_dir
from utils.result.file import read_result, result_path
from utils.spec.models import workload_shape


@pytest.fixture
def workspace(tmp_path):
    """A config with tokenizers for both models (no dataset files)."""
    config = write_config(tmp_path)
    cfg = load_config(config, environ={})
    for model in ("llama", "qwen", "mistral"):
        make_tokenizer(tokenizer_dir(cfg, model), 400)
    return SimpleNamespace(config=config, cfg=cfg, tmp=tmp_path)


def _ctx(cfg, model="llama", platform="nvd", run_index=None):
    return RunContext(cfg=cfg, platform=platform, framework="nemo", model=model, run_index=run_index,
                      result_path=result_path(cfg.output_dir, platform, "nemo", model, run_index),
                      log_path=log_path_for(cfg, platform, "nemo", model, run_index), data=job_data(cfg, model),
                      shape=workload_shape(cfg, model))


def test_plan_runs_torchrun_with_the_nvidia_environment(workspace):
    ctx = _ctx(workspace.cfg, "qwen", run_index=2)
    plan = nemo_plugin.plan(ctx)
    assert plan.argv[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=8" in plan.argv and "--master-port=29555" in plan.argv
    tail = plan.argv[plan.argv.index("train.nemo.entry") - 1:]
    assert tail[:4] == ["-m", "train.nemo.entry", "--model", "qwen"]
    assert tail[tail.index("--result") + 1] == str(ctx.result_path) and ctx.result_path.name.endswith("_r2.json")
    assert tail[tail.index("--run-index") + 1] == "2"
    for key in ("CUDA_DEVICE_MAX_CONNECTIONS", "NVTE_FUSED_ATTN", "NVTE_FLASH_ATTN", "PYTORCH_CUDA_ALLOC_CONF",
                "TOKENIZERS_PARALLELISM"):
        assert key in plan.env
    (file, text), = plan.files.items()
    assert tail[tail.index("--overrides") + 1] == str(file)
    assert json.loads(text)["fields"]["trainer.strategy.tensor_model_parallel_size"] == 1
    assert plan.cwd == REPO
    assert any("dataset files missing" in note for note in plan.notes)
    assert any("defaults to TP=2" in note for note in plan.notes)


def test_plan_refuses_other_platforms(workspace):
    with pytest.raises(ValueError, match="nvd only"):
        nemo_plugin.plan(_ctx(workspace.cfg, platform="amd"))


def test_nemo_on_amd_maps_to_primus_with_a_note():
    from train.launch.jobs import resolve_framework

    framework, note = resolve_framework("amd", "nemo")
    assert framework == "prim" and "nemo" in note and "prim" in note
    assert resolve_framework("nvd", "nemo") == ("nemo", None)


def test_launcher_dry_run_shows_the_generated_overrides_file(workspace):
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "nvd", "--framework", "nemo",
                           "--model", "qwen", "--dry-run"],
                          cwd=REPO, env=nemo_environ(workspace.config), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "# generated file:" in proc.stdout and "train_nvd_nemo_qwen.nemo_overrides.json" in proc.stdout
    assert '"trainer.max_steps": 33' in proc.stdout
    assert "NVTE_FUSED_ATTN=1" in proc.stdout and "NVTE_FLASH_ATTN=0" in proc.stdout


def test_launcher_dry_run_without_a_tokenizer_fails_clearly(tmp_path):
    config = write_config(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "nvd", "--framework", "nemo",
                           "--model", "qwen", "--dry-run"],
                          cwd=REPO, env=nemo_environ(config), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no tokenizer" in proc.stderr and "prepare the data first" in proc.stderr


def test_entry_help_and_missing_result_argument(workspace):
    proc = subprocess.run([sys.executable, "-m", "train.nemo.entry", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "--result" in proc.stdout and "--overrides" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "train.nemo.entry", "--model", "llama"], cwd=REPO,
                          env=nemo_environ(workspace.config), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--result" in proc.stderr


@pytest.mark.parametrize(("log_line", "cause"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
     "NCCL/RCCL error"),
    ("RuntimeError: Rank 3: found NaN in local grad norm in backward pass", "NaN loss"),
])
def test_collect_names_the_cause_when_no_result_was_written(workspace, log_line, cause):
    ctx = _ctx(workspace.cfg)
    ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.log_path.write_text(f"step 1\n{log_line}\nE0101 torchrun: worker failed\n", encoding="utf-8")
    result = nemo_plugin.collect(ctx, None, 1)
    assert result.status == "failed" and result.error.startswith(f"{cause}: ") and "exit code 1" in result.error
    assert log_line in result.error  # the line itself, as utils/result/failures.py found it
    assert result.framework == "nemo" and result.step_times == []


def test_collect_prefers_the_callbacks_result(workspace):
    from utils.machine.hardware import collect_gpu_info
    from utils.result.file import finalize_result, new_result, write_result
    from utils.schema.measures import Source
    from utils.spec.models import get_shape

    ctx = _ctx(workspace.cfg)
    result = new_result(workspace.cfg, platform="nvd", framework="nemo", model="llama", shape=get_shape("llama"),
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    write_result(ctx.result_path, finalize_result(result, "incomplete", "stopped by the test"))
    ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.log_path.write_text("torch.OutOfMemoryError: CUDA out of memory\n", encoding="utf-8")  # not used
    assert nemo_plugin.collect(ctx, None, 0).error == "stopped by the test (0 of 33 steps done)"
    assert read_result(ctx.result_path).source.kind == "callback"


def test_collect_without_result_or_known_cause_defers_to_the_launcher(workspace):
    ctx = _ctx(workspace.cfg)
    assert nemo_plugin.collect(ctx, None, 1) is None  # no log at all: launcher writes exit code + tail


def test_apply_overrides_sets_nested_fields_and_builds_configs():
    calls = []

    class FakeRun:
        @staticmethod
        def Config(target, **kwargs):  # mirrors nemo_run.Config
            calls.append(target)
            return ("Config", target, kwargs)

    recipe = SimpleNamespace(trainer=SimpleNamespace(strategy=SimpleNamespace(context_parallel_size=2)),
                             data=None, resume="auto")
    overrides = NemoOverrides(model="llama", recipe="x.y", recipe_kwargs={}, fields={
        "trainer.strategy.context_parallel_size": 1,
        "data": {"_target_": "collections.OrderedDict", "_call_": "config", "paths": ["/p"],
                 "tokenizer": {"_target_": "json.loads", "_call_": "factory", "s": None}},
        "resume": None,
    })
    with pytest.raises(TypeError):  # json.loads(s=None): factories are really called
        nemo_entry.apply_overrides(recipe, overrides, FakeRun)
    overrides.fields["data"]["tokenizer"] = {"_target_": "os.path.join", "_call_": "factory", "a": "/t"}
    nemo_entry.apply_overrides(recipe, overrides, FakeRun)
    assert recipe.trainer.strategy.context_parallel_size == 1 and recipe.resume is None
    kind, target, kwargs = recipe.data
    assert kind == "Config" and target.__name__ == "OrderedDict" and kwargs["paths"] == ["/p"]
    assert kwargs["tokenizer"] == "/t"
    bad = NemoOverrides(model="llama", recipe="x", recipe_kwargs={}, fields={"trainer.nonexistent.x": 1})
    with pytest.raises(AttributeError):
        nemo_entry.apply_overrides(recipe, bad, FakeRun)


class _RecordingConfig(SimpleNamespace):
    """Stands in for ``nemo_run.Config``: attribute writes land on the object, like fiddle's buildables."""


class _RecordingRun:
    @staticmethod
    def Config(target, **kwargs):
        return _RecordingConfig(target=target, **kwargs)


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_overrides_apply_to_the_recipes_real_strategy_shapes(workspace, model):
    """NeMo 2.3's qwen25_7b builds MegatronStrategy without ddp=, so ``strategy.ddp`` is the string
    "megatron"; llama31_8b passes a DistributedDataParallelConfig. Both must take the overrides."""
    recipe_ddp = "megatron" if model == "qwen" else _RecordingConfig(grad_reduce_in_fp32=True,
                                                                     overlap_grad_reduce=True)
    plugin = _RecordingConfig(precision="bf16-mixed", grad_reduce_in_fp32=True)
    recipe = SimpleNamespace(
        trainer=SimpleNamespace(strategy=SimpleNamespace(ddp=recipe_ddp), plugins=plugin),
        model=SimpleNamespace(config=SimpleNamespace()), optim=SimpleNamespace(config=SimpleNamespace()),
        data=None, log=None, resume="auto",
    )
    cfg = workspace.cfg
    overrides = nemo_plugin.overrides_for(cfg, model, job_data(cfg, model), f"train_nvd_nemo_{model}")
    # Fields whose objects are NeMo classes (data module, scheduler, logger, the bf16_mixed() factory)
    # need NeMo; the strategy, DDP, plugin and model fields are what the Qwen crash was about.
    fields = {path: value for path, value in overrides.fields.items()
              if not json.dumps(value).count('"_target_": "nemo.')}
    fields["trainer.plugins"] = {"_target_": "types.SimpleNamespace", "_call_": "config",
                                 "grad_reduce_in_fp32": True}  # stands in for bf16_mixed()
    fields = {"trainer.plugins": fields.pop("trainer.plugins"), **fields}
    factory_free = NemoOverrides(model=model, recipe="x", recipe_kwargs={}, fields=fields)
    nemo_entry.apply_overrides(recipe, factory_free, _RecordingRun)
    ddp = recipe.trainer.strategy.ddp
    assert ddp.target.__name__ == "DistributedDataParallelConfig"
    assert ddp.grad_reduce_in_fp32 is False and ddp.overlap_grad_reduce is False
    assert ddp.overlap_param_gather is False
    assert recipe.trainer.plugins.grad_reduce_in_fp32 is False
    assert recipe.model.config.attention_backend.name == "fused"  # megatron-core's AttnBackend member


def test_the_preflight_writes_the_pad_free_tokenizer_nemo_is_given(workspace, monkeypatch):
    """Found by the full conformance run (issue 40): the preflight's dry-run plan names Qwen's pad-free tokenizer copy
    without writing it, and NeMo's recipe, built by the preflight, could not load a folder that was not there.
    resolve() writes the copy before NeMo is asked."""
    import shutil
    from dataclasses import replace

    from tests.helpers.tokenizers import real_format_tokenizer

    qwen = tokenizer_dir(workspace.cfg, "qwen")
    shutil.rmtree(qwen)
    real_format_tokenizer("qwen", qwen)  # its pad is its EOS: the stacks get a copy without the pad role
    plan = nemo_plugin.plan(replace(_ctx(workspace.cfg, "qwen"), dry_run=True))
    fields = json.loads(plan.generated(".nemo_overrides.json")[1])["fields"]
    named = fields["data"]["tokenizer"]["pretrained_model_name"]
    assert "-nopad-" in named and not Path(named).exists()
    seen = []

    def probe(module, request, python, framework, **_):
        given = json.loads(Path(request["overrides"]).read_text(encoding="utf-8"))["fields"]["data"]["tokenizer"]
        seen.append((given["pretrained_model_name"], Path(given["pretrained_model_name"]).is_dir()))
        raise RuntimeError("stop after the check")

    monkeypatch.setattr(nemo_plugin, "run_probe", probe)
    with pytest.raises(RuntimeError, match="stop after the check"):
        nemo_plugin.resolve(replace(_ctx(workspace.cfg, "qwen"), dry_run=True), plan)
    assert seen == [(named, True)]
