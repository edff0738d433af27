"""A fourth model is one registry row (issue 47): registered in a fixture, it runs on every stack.

The row below is a fixture, not a model tprimat benchmarks: a Mistral-like decoder at 1B scale with its own key.
Its stack names are ones the pinned trees hold (Primus's dense Llama 2 file, NeMo's Mistral recipe, as the
Mistral row uses them); the test proves that each stack reads them from the row, not that this model would
train well. The registry is patched in place (``MODELS`` is one dict every module reads), so nothing else in
the house learns of the model: its dry run and its preflight on tran, deep, mega, prim and nemo (the recording
stand-ins of tests/fakes/), its shape at both sizes and its sample tokenizer come from the row alone.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.helpers.megatron import make_context, parse_flags
from tests.helpers.nemo import make_dataset_stub
from tests.helpers.preflight import use_fakes
from tests.helpers.tokenizers import real_format_tokenizer
from train.launch import preflight as pf
from train.launch.context import job_context, load_plugin
from train.launch.launcher import launch
from utils.schema.run import EffectiveSettings
from utils.spec import registry
from utils.spec.models import get_shape
from utils.spec.registry import MODELS, Model, Stacks
from utils.spec.shape import ModelShape

KEY = "fourth"
FOURTH = Model(
    ModelShape(key=KEY, size="full", display_name="Fourth 1B (fixture)", hf_repo="example/fourth-1b",
               hf_architecture="MistralForCausalLM", num_layers=16, hidden_size=2048, ffn_hidden_size=7168,
               num_attention_heads=16, num_query_groups=4, vocab_size=32768, rope_theta=1000000.0, norm_eps=1e-5,
               qkv_bias=False, max_position_embeddings=32768),
    tiny=dict(num_layers=2, hidden_size=96, ffn_hidden_size=336, num_attention_heads=6, num_query_groups=2,
              max_position_embeddings=4096),
    gated=False,
    tokenizer=MODELS["mistral"].tokenizer,
    stacks=Stacks(megatron_tokenizer_size=32768, primus_model_file="llama2_7B.yaml", nemo_parallel=(1, 1, 1),
                  nemo_recipe="nemo.collections.llm.recipes.mistral_7b.pretrain_recipe",
                  nemo_fields={"model.config.window_size": None}),
    line="-.", hatch="xx",
)
# Every stack, on a platform it runs on.
STACKS = [("cpu", "tran"), ("cpu", "deep"), ("nvd", "mega"), ("amd", "prim"), ("nvd", "nemo")]


@pytest.fixture
def fourth(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The row registered, the stand-in frameworks wired, and its sample tokenizer made from the row's layout."""
    monkeypatch.setitem(registry.MODELS, KEY, FOURTH)
    cfg, _ = use_fakes(monkeypatch, tmp_path)
    real_format_tokenizer(KEY, cfg.data_dir / "tokenizers" / f"sample-{KEY}")
    make_dataset_stub(cfg.data_dir / f"sample-{KEY}_text_document")
    return cfg


def test_the_row_is_the_models_only_entry(fourth) -> None:
    """The registry's lists, the shapes at both sizes and the sample tokenizer's special tokens come from the row."""
    assert KEY in registry.model_names() and registry.display_name("model", KEY) == "Fourth 1B (fixture)"
    assert get_shape(KEY) == FOURTH.shape
    tiny = get_shape(KEY, "tiny")
    assert (tiny.num_layers, tiny.hidden_size, tiny.display_name) == (2, 96, "Fourth 1B (fixture) (tiny)")
    config = json.loads((fourth.data_dir / "tokenizers" / f"sample-{KEY}" / "tokenizer_config.json").read_text())
    assert (config["eos_token"], config["bos_token"]) == (FOURTH.tokenizer.eos, FOURTH.tokenizer.bos)
    assert config["tokenizer_class"] == FOURTH.tokenizer.tokenizer_class


@pytest.mark.parametrize(("platform", "framework"), STACKS)
def test_it_dry_runs_and_passes_the_preflight_on_every_stack(fourth, capsys, platform, framework) -> None:
    ctx = job_context(fourth, platform, framework, KEY, dry_run=True)
    assert launch(ctx, load_plugin(framework), dry_run=True) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("# command\n") and "# note: memory: " in shown
    plan = load_plugin(framework).plan(ctx)
    settings = pf.preflight(ctx, plan)
    assert isinstance(settings, EffectiveSettings) and settings.reason is None
    assert settings.settings["num_layers"] == FOURTH.shape.num_layers
    assert settings.settings["hidden_size"] == FOURTH.shape.hidden_size


def test_each_vendor_stack_names_the_model_as_the_row_says(fourth) -> None:
    """Megatron's layers and vocabulary, Primus's model file, NeMo's recipe and its corrected fields: the row's."""
    mega = load_plugin("mega").plan(make_context(fourth, "nvd", "mega", KEY, dry_run=True))
    flags = parse_flags(mega.args_after("pretrain_gpt.py"))
    assert flags["--num-layers"] == ["16"] and flags["--num-query-groups"] == ["4"]
    prim = load_plugin("prim").plan(make_context(fourth, "amd", "prim", KEY, dry_run=True))
    experiment = yaml.safe_load(prim.generated(".primus.yaml")[1])["modules"]["pre_trainer"]
    assert experiment["model"] == FOURTH.stacks.primus_model_file
    assert experiment["overrides"]["ffn_hidden_size"] == FOURTH.shape.ffn_hidden_size
    nemo = load_plugin("nemo").plan(make_context(fourth, "nvd", "nemo", KEY, dry_run=True))
    overrides = json.loads(nemo.generated(".nemo_overrides.json")[1])
    assert overrides["recipe"] == FOURTH.stacks.nemo_recipe
    assert overrides["fields"]["model.config.window_size"] is None
    assert overrides["fields"]["model.config.num_layers"] == FOURTH.shape.num_layers


def test_without_its_tokenizer_files_megatron_takes_the_rows_size(fourth, tmp_path: Path) -> None:
    """A plan made where the real tokenizer is not (DATASET other than sample) pads the row's known size."""
    cfg = replace(fourth, dataset="bc")
    plan = load_plugin("mega").plan(make_context(cfg, "nvd", "mega", KEY, dry_run=True))
    assert any("tokenizer has 32768 tokens (known size of the real tokenizer" in note for note in plan.notes)
