"""train/tran/init.py: tran and deep initialise the transformers models as Megatron does (issue 23)."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from tests.helpers.megatron_core import WHEELS, side_env
from train.rules.init_std import megatron_init_stds
from train.tran.init import init_like_megatron
from train.tran.step import build_model
from utils.config.model import REPO_ROOT
from utils.spec.models import get_shape


def test_the_scaled_std_is_megatrons_rule() -> None:
    stds = megatron_init_stds(0.02, 32)
    assert stds.std == 0.02 and stds.scaled_std == pytest.approx(0.0025)  # issue 23: 8B models, 32 layers
    assert megatron_init_stds(0.0, 32).scaled_std == 0.0  # config.env allows INIT_STD=0
    for bad in ((0.02, 0), (-0.02, 32), (float("nan"), 32)):
        with pytest.raises(ValueError):
            megatron_init_stds(*bad)


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
    from tests.helpers.workload import tiny_environ
    from train.launch.context import job_context
    from train.tran.plugin import reference_record
    from utils.config.load import load_config
    from utils.config.model import REPO_ROOT

    cfg = load_config(REPO_ROOT / "config.env", environ=tiny_environ(tmp_path / "data", tmp_path / "out"))
    record = reference_record(job_context(cfg, "cpu", "tran", "llama"))
    layers = get_shape("llama", cfg.model_size).num_layers
    assert record["output_layer_init_method_std"] == pytest.approx(cfg.init_std / math.sqrt(2 * layers))


READ_BACK = ("import json, megatron.core as core; "
             "from megatron.core.transformer.transformer_config import TransformerConfig; "
             "from train.settings.probe_common import scaled_init_std; "
             "config = TransformerConfig(num_layers=32, hidden_size=64, num_attention_heads=4, init_method_std=0.02); "
             "print(json.dumps([scaled_init_std(config), core.__file__]))")


@pytest.mark.parametrize("version", sorted(WHEELS))
def test_the_probes_read_back_each_megatron_core_line(version: str) -> None:
    """The probes' read-back (train/settings/probe_common.py ``scaled_init_std``) on the TransformerConfig of the
    megatron-core lines the images run: 0.12 (NeMo 25.04, whose GPTConfig is a TransformerConfig) and 0.15
    (MEGATRON_REF, Primus). A line that stopped using a ``functools.partial`` would give a string here."""
    site = side_env(version)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    run = subprocess.run([sys.executable, "-c", READ_BACK], capture_output=True, text=True, env=environ,
                         cwd=REPO_ROOT, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    std, core_file = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(site) in core_file  # the wheel's code, not the virtualenv's
    assert std == pytest.approx(megatron_init_stds(0.02, 32).scaled_std, rel=1e-12)


def test_a_config_without_megatrons_partial_is_named_not_assumed() -> None:
    from types import SimpleNamespace

    from train.settings.probe_common import scaled_init_std

    assert scaled_init_std(SimpleNamespace(output_layer_init_method=lambda tensor: tensor)).startswith("function")
    assert "without a numeric std" in scaled_init_std(SimpleNamespace(
        output_layer_init_method=functools.partial(torch.nn.init.normal_, mean=0.0)))
