"""MEGATRON_IMPL (transformer_engine | local): the config key, and compare's like-for-like rule.

The launcher and preflight parts (``--transformer-impl local`` and the fusions it turns off in the
mega/prim dry runs) live with train/ and are tested there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from tests.helpers.evaluate import make_result, workload_config
from utils.config.rules import ConfigError
from utils.schema.run import EffectiveSettings


def test_default_is_transformer_engine_and_local_is_accepted():
    assert workload_config().megatron_impl == "transformer_engine"
    assert workload_config(MEGATRON_IMPL="local").megatron_impl == "local"


def test_an_unknown_implementation_is_one_line_naming_both():
    with pytest.raises(ConfigError, match=r"^MEGATRON_IMPL='te': allowed values are transformer_engine, local$"):
        workload_config(MEGATRON_IMPL="te")


def _with_impl(impl: str):
    def mutate(result):
        result.effective_settings = EffectiveSettings(settings={"transformer_impl": impl}, resolved_by="test")
    return mutate


def test_mixing_implementations_is_not_like_for_like(tmp_path: Path):
    make_result(tmp_path, "amd", "mega", mutate=_with_impl("transformer_engine"))
    make_result(tmp_path, "nvd", "mega", mutate=_with_impl("local"))
    report = check_fairness(load_directory(tmp_path).results)
    assert not report.fair
    (difference,) = report.differences
    assert difference.describe() == ("[llama] transformer_impl (Megatron's implementation: not like-for-like) differs: "
                                     "amd_mega_llama=transformer_engine, nvd_mega_llama=local")


@pytest.mark.parametrize("impl", ["transformer_engine", "local"])
def test_one_implementation_on_both_vendors_is_fair(tmp_path: Path, impl: str):
    make_result(tmp_path, "amd", "mega", mutate=_with_impl(impl))
    make_result(tmp_path, "nvd", "mega", mutate=_with_impl(impl))
    make_result(tmp_path, "nvd", "tran")  # no Megatron implementation to compare: not part of the rule
    assert check_fairness(load_directory(tmp_path).results).fair


# ---------------------------------------------------------------------------
# the launchers and the preflight (train/megatron/args.py, train/settings/expected.py, train/launch/preflight.py)

LOCAL_FLAGS = ("--no-rope-fusion", "--no-masked-softmax-fusion", "--no-gradient-accumulation-fusion",
               "--no-persist-layer-norm")


def _mega_flags(tmp_path: Path, platform: str, **config: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    from tests.helpers.megatron import make_config, make_context, parse_flags
    from train.mega import plugin

    plan = plugin.plan(make_context(make_config(tmp_path, **config), platform, "mega", "llama", dry_run=True))
    script = next(a for a in plan.argv if a.endswith("pretrain_gpt.py"))
    return parse_flags(plan.argv[plan.argv.index(script) + 1:]), plan.env


@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_local_reaches_the_mega_dry_run(tmp_path: Path, platform: str):
    from train.settings.platform_env import attention_env

    flags, env = _mega_flags(tmp_path, platform, MEGATRON_IMPL="local")
    assert flags["--transformer-impl"] == ["local"]
    assert flags["--attention-backend"] == ["auto"]
    for flag in LOCAL_FLAGS:
        assert flags[flag] == [], flag
    assert {k: v for k, v in env.items() if k.endswith("_ATTN")} == attention_env("auto")  # what Megatron requires
    assert "--no-bias-swiglu-fusion" not in flags and "--no-bias-dropout-fusion" not in flags  # Megatron's own jit


def test_transformer_engine_stays_the_default_dry_run(tmp_path: Path):
    flags, env = _mega_flags(tmp_path, "nvd")
    assert flags["--transformer-impl"] == ["transformer_engine"] and flags["--attention-backend"] == ["fused"]
    assert env["NVTE_FUSED_ATTN"] == "1"
    assert not set(LOCAL_FLAGS) & set(flags) - {"--no-gradient-accumulation-fusion"}


def test_local_reaches_the_primus_experiment(tmp_path: Path):
    import yaml

    from tests.helpers.megatron import make_config, make_context
    from train.prim import plugin

    plan = plugin.plan(make_context(make_config(tmp_path, MEGATRON_IMPL="local"), "amd", "prim", "llama",
                                    dry_run=True))
    overrides = yaml.safe_load(next(iter(plan.files.values())))["modules"]["pre_trainer"]["overrides"]
    assert overrides["transformer_impl"] == "local" and overrides["attention_backend"] == "auto"
    assert overrides["apply_rope_fusion"] is False and overrides["masked_softmax_fusion"] is False
    assert overrides["gradient_accumulation_fusion"] is False and overrides["no_persist_layer_norm"] is True


@pytest.mark.parametrize(("platform", "framework"), [("nvd", "mega"), ("amd", "prim")])
def test_the_memory_check_estimates_the_implementation_that_runs(tmp_path: Path, platform: str, framework: str):
    # It estimated Transformer Engine's activations whatever MEGATRON_IMPL said: 17% under the measured peak of
    # mega with the local implementation on an H200 (docs/PERFORMANCE.md).
    from tests.helpers.megatron import make_config, make_context
    from train.launch.context import load_plugin
    from utils.measure.memory import ACTIVATIONS, megatron_recipe

    for impl, family in (("transformer_engine", "megatron_te"), ("local", "megatron_local")):
        ctx = make_context(make_config(tmp_path, MEGATRON_IMPL=impl), platform, framework, "llama", dry_run=True)
        plugin = load_plugin(framework)
        recipe = plugin.memory(ctx, plugin.plan(ctx))
        assert recipe.activations == ACTIVATIONS[family], impl
        assert recipe == megatron_recipe(framework, transformer_impl=impl, grad_reduce_in_fp32=False)
    assert ACTIVATIONS["megatron_te"] != ACTIVATIONS["megatron_local"]


def test_nemo_is_estimated_with_transformer_engine_whatever_megatron_impl_says(tmp_path: Path):
    # NeMo's recipes build Transformer Engine layers (test_the_fairness_table_knows_both_implementations).
    from tests.helpers.megatron import make_config, make_context
    from train.launch.context import load_plugin
    from train.launch.contract import LaunchPlan
    from utils.measure.memory import megatron_recipe

    ctx = make_context(make_config(tmp_path, MEGATRON_IMPL="local"), "nvd", "nemo", "llama", dry_run=True)
    recipe = load_plugin("nemo").memory(ctx, LaunchPlan(argv=[]))  # its plan needs a tokenizer; memory reads none
    assert recipe == megatron_recipe("nemo", transformer_impl="transformer_engine", grad_reduce_in_fp32=False)


@pytest.mark.parametrize("framework", ["mega", "prim", "nemo"])
def test_the_fairness_table_knows_both_implementations(tmp_path: Path, framework: str):
    from tests.helpers.megatron import make_config, make_context
    from train.settings.expected import LOCAL_IMPL, required_settings

    platform = "amd" if framework == "prim" else "nvd"
    for impl in ("transformer_engine", "local"):
        ctx = make_context(make_config(tmp_path, MEGATRON_IMPL=impl), platform, framework, "llama", dry_run=True)
        expected = required_settings(ctx.cfg, platform, framework, ctx.shape, 128256, ctx.profile.expected())
        if framework == "nemo":  # NeMo's recipes build Transformer Engine layers whatever MEGATRON_IMPL says
            assert "transformer_impl" not in expected and expected["apply_rope_fusion"] is True
        elif impl == "local":
            assert expected["transformer_impl"] == "local"
            assert {key: expected[key] for key in LOCAL_IMPL} == LOCAL_IMPL
        else:
            assert expected["transformer_impl"] == "transformer_engine" and expected["apply_rope_fusion"] is True


@pytest.mark.parametrize(("platform", "framework"), [("nvd", "mega"), ("amd", "prim")])
def test_local_passes_the_preflight_and_is_recorded(tmp_path: Path, monkeypatch, platform: str, framework: str):
    from tests.helpers.megatron import make_context
    from tests.helpers.preflight import use_fakes
    from train.launch import preflight as pf
    from train.launch.context import load_plugin

    cfg, _ = use_fakes(monkeypatch, tmp_path, MEGATRON_IMPL="local")
    ctx = make_context(cfg, platform, framework, "llama", dry_run=True)
    settings = pf.preflight(ctx, load_plugin(framework).plan(ctx)).settings
    assert settings["transformer_impl"] == "local" and settings["attention_backend"] == "auto"
    assert settings["apply_rope_fusion"] is False and settings["persist_layer_norm"] is False


def test_a_framework_that_resolves_another_implementation_is_stopped(tmp_path: Path, monkeypatch):
    from dataclasses import replace

    from tests.helpers.megatron import make_context
    from tests.helpers.preflight import use_fakes
    from train.launch import preflight as pf
    from train.launch.context import load_plugin

    cfg, _ = use_fakes(monkeypatch, tmp_path, MEGATRON_IMPL="local")
    ctx = make_context(cfg, "nvd", "mega", "llama", dry_run=True)
    plan = load_plugin("mega").plan(ctx)
    argv = [("transformer_engine" if word == "local" else word) for word in plan.argv]
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, replace(plan, argv=argv))
    assert caught.value.setting == "transformer_impl"
    message = str(caught.value)
    assert "transformer_impl='transformer_engine'" in message and "transformer_impl='local'" in message
