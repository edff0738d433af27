"""train/tran/init.py: tran and deep initialise the transformers models as Megatron does (issue 23)."""

from __future__ import annotations

import math

import pytest
import torch

from train.tran.init import init_like_megatron, megatron_init_stds
from train.tran.step import build_model
from utils.models import get_shape


def test_the_scaled_std_is_megatrons_rule() -> None:
    stds = megatron_init_stds(0.02, 32)
    assert stds.std == 0.02 and stds.scaled_std == pytest.approx(0.0025)  # issue 23: 8B models, 32 layers
    with pytest.raises(ValueError):
        megatron_init_stds(0.02, 0)


def test_megatron_core_uses_the_same_rule() -> None:
    """megatron-core's own TransformerConfig: output_layer_init_method = N(0, std / sqrt(2 L))."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(num_layers=32, hidden_size=64, num_attention_heads=4, init_method_std=0.02)
    assert config.output_layer_init_method.keywords["std"] == pytest.approx(megatron_init_stds(0.02, 32).scaled_std)
    assert config.init_method.keywords["std"] == 0.02


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_per_module_std_on_the_tiny_model(model: str) -> None:
    shape = get_shape(model, "tiny", vocab_size=4096)
    torch.manual_seed(0)
    built = build_model(model, shape, torch.device("cpu"), init_std=0.02)
    scaled = 0.02 / math.sqrt(2 * shape.num_layers)
    checked = set()
    for name, param in built.named_parameters():
        leaf = name.rsplit(".", 2)[-2]
        if name.endswith("bias"):
            assert torch.count_nonzero(param) == 0, name
        elif "norm" in leaf:
            assert torch.all(param == 1.0), name
        else:
            expected = scaled if leaf in ("o_proj", "down_proj") else 0.02
            assert param.float().std().item() == pytest.approx(expected, rel=0.08), name
            assert abs(param.float().mean().item()) < expected * 0.1, name
        checked.add(leaf)
    assert {"o_proj", "down_proj", "q_proj", "gate_proj", "embed_tokens", "lm_head"} <= checked


def test_init_is_seeded() -> None:
    shape = get_shape("llama", "tiny", vocab_size=1024)
    weights = []
    for _ in range(2):
        torch.manual_seed(7)
        weights.append(build_model("llama", shape, torch.device("cpu"), 0.02).model.layers[0].self_attn.o_proj.weight)
    assert torch.equal(*weights)


def test_init_like_megatron_returns_the_stds() -> None:
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8))
    assert init_like_megatron(layer, 0.01, 8).scaled_std == pytest.approx(0.01 / 4)


def test_tran_and_deep_record_the_scaled_std(tmp_path) -> None:
    from tests.conftest import tiny_environ
    from train.context import job_context
    from train.tran.plugin import reference_record
    from utils.configure import REPO_ROOT, load_config

    cfg = load_config(REPO_ROOT / "config.env", environ=tiny_environ(tmp_path / "data", tmp_path / "out"))
    record = reference_record(job_context(cfg, "cpu", "tran", "llama"))
    layers = get_shape("llama", cfg.model_size).num_layers
    assert record["output_layer_init_method_std"] == pytest.approx(cfg.init_std / math.sqrt(2 * layers))
