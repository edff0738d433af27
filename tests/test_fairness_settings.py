"""The fairness table's distributed settings are identical in every vendor launcher (mega, prim, nemo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_megatron import make_config, parse_flags
from train.megatron_args import vocab_padding
from train.nemo_recipe import build_overrides
from train.train_mega import megatron_args
from train.train_prim import primus_overrides
from utils.models import get_shape


@pytest.mark.parametrize("model", ["llama", "qwen"])
def test_no_overlap_distributed_optimizer_and_bf16_gradient_reduction_everywhere(tmp_path: Path, model: str):
    cfg = make_config(tmp_path)
    shape = get_shape(model, "full")
    prefix, tokenizer = tmp_path / "data" / f"bc-{model}_text_document", tmp_path / "data" / "tokenizers" / model

    for platform in ("nvd", "amd"):
        flags = parse_flags(megatron_args(cfg, shape, platform, prefix, tokenizer))
        assert "--use-distributed-optimizer" in flags
        assert "--overlap-grad-reduce" not in flags and "--overlap-param-gather" not in flags
        assert "--accumulate-allreduce-grads-in-fp32" not in flags

    primus = primus_overrides(cfg, shape, prefix, tokenizer, vocab_padding(cfg, model, shape, tokenizer))
    assert primus["use_distributed_optimizer"] is True
    assert primus["overlap_grad_reduce"] is False and primus["overlap_param_gather"] is False

    nemo = build_overrides(cfg, model, shape, data_prefix=prefix, tokenizer_dir=tokenizer,
                           log_dir=tmp_path / "logs", index_cache_dir=tmp_path / "cache").fields
    assert nemo["optim.config.use_distributed_optimizer"] is True
    assert nemo["trainer.strategy.ddp.overlap_grad_reduce"] is False
    assert nemo["trainer.strategy.ddp.overlap_param_gather"] is False
    assert nemo["trainer.strategy.ddp.grad_reduce_in_fp32"] is False
