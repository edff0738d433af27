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


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_no_overlap_distributed_optimizer_and_bf16_gradient_reduction_everywhere(tmp_path: Path, model: str):
    cfg = make_config(tmp_path)
    shape = get_shape(model, "full")
    prefix, tokenizer = tmp_path / "data" / f"bc-{model}_text_document", tmp_path / "data" / "tokenizers" / model

    for platform in ("nvd", "amd"):
        flags = parse_flags(megatron_args(cfg, shape, platform, prefix, tokenizer))
        assert "--use-distributed-optimizer" in flags
        assert "--overlap-grad-reduce" not in flags and "--overlap-param-gather" not in flags
        assert "--accumulate-allreduce-grads-in-fp32" not in flags
        # Without this flag Megatron's validate_args turns bf16 gradient reduction into fp32.
        assert "--grad-reduce-in-bf16" in flags

    primus = primus_overrides(cfg, shape, prefix, tokenizer, vocab_padding(cfg, model, shape, tokenizer))
    assert primus["use_distributed_optimizer"] is True
    assert primus["overlap_grad_reduce"] is False and primus["overlap_param_gather"] is False
    assert primus["grad_reduce_in_bf16"] is True

    nemo = build_overrides(cfg, model, shape, data_prefix=prefix, tokenizer_dir=tokenizer,
                           log_dir=tmp_path / "logs", index_cache_dir=tmp_path / "cache").fields
    assert nemo["optim.config.use_distributed_optimizer"] is True
    ddp = nemo["trainer.strategy.ddp"]
    assert ddp["_target_"] == "megatron.core.distributed.DistributedDataParallelConfig"
    assert ddp["overlap_grad_reduce"] is False and ddp["overlap_param_gather"] is False
    assert ddp["grad_reduce_in_fp32"] is False and ddp["use_distributed_optimizer"] is True
    # The bf16 plugin re-applies its own grad_reduce_in_fp32 (default True) when it connects.
    assert nemo["trainer.plugins.grad_reduce_in_fp32"] is False
    assert list(nemo).index("trainer.plugins.grad_reduce_in_fp32") > list(nemo).index("trainer.plugins")


def test_fp16_and_fp32_runs_do_not_ask_megatron_for_bf16_reduction(tmp_path: Path):
    shape = get_shape("llama", "full")
    prefix, tokenizer = tmp_path / "p", tmp_path / "tok"
    for precision in ("fp16", "fp32"):
        cfg = make_config(tmp_path, PRECISION=precision)
        assert "--grad-reduce-in-bf16" not in parse_flags(megatron_args(cfg, shape, "nvd", prefix, tokenizer))
