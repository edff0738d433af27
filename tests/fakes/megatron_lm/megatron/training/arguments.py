"""Stand-in for Megatron-LM's argument parsing and validation (records its argv; see ../../README.md)."""

import argparse
import functools
import json
import math
import os
import sys

# dest defaults for what tprimat does not pass (the real parser has ~600)
DEFAULTS = {
    "fp8": None, "bf16": False, "fp16": False, "grad_reduce_in_bf16": False,
    "accumulate_allreduce_grads_in_fp32": False,
    "check_for_nan_in_loss_and_grad": True, "bias_swiglu_fusion": True, "bias_gelu_fusion": True,
    "bias_dropout_fusion": True, "masked_softmax_fusion": True, "apply_rope_fusion": True,
    "no_persist_layer_norm": False, "cross_entropy_loss_fusion": False, "gradient_accumulation_fusion": True,
    "attention_softmax_in_fp32": False, "fp32_residual_connection": False, "recompute_granularity": None,
    "tp_comm_overlap": False, "manual_gc": False, "calculate_per_token_loss": False, "num_workers": 2,
    "create_attention_mask_in_dataloader": True, "reset_position_ids": False, "reset_attention_mask": False,
    "rerun_mode": "disabled", "eod_mask_loss": False, "save": None, "save_interval": None, "fp8_param_gather": False,
    "fp8_recipe": "delayed", "fp8_amax_history_len": 1, "fp8_amax_compute_algo": "most_recent",
    "ddp_average_in_collective": False,
    "sequence_parallel": False, "swiglu": False, "add_qkv_bias": False, "use_rope_scaling": False,
    "untie_embeddings_and_output_weights": False, "use_distributed_optimizer": False,
    "overlap_grad_reduce": False, "overlap_param_gather": False, "attention_backend": "auto",
}
NEGATIVE = {
    "--disable-bias-linear": "add_bias_linear",
    "--no-gradient-accumulation-fusion": "gradient_accumulation_fusion",
    "--no-bias-swiglu-fusion": "bias_swiglu_fusion", "--no-bias-dropout-fusion": "bias_dropout_fusion",
    "--no-masked-softmax-fusion": "masked_softmax_fusion", "--no-rope-fusion": "apply_rope_fusion",
    "--no-create-attention-mask-in-dataloader": "create_attention_mask_in_dataloader",
    "--no-check-for-nan-in-loss-and-grad": "check_for_nan_in_loss_and_grad",
}
RENAMED = {"--fp8-format": "fp8"}


def _value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_args(extra_args_provider=None, ignore_unknown_args=False):
    argv = sys.argv[1:]
    record = os.environ.get("TPRIMAT_FAKE_RECORD")
    if record:
        with open(record, "w", encoding="utf-8") as handle:
            json.dump({"argv": argv, "env": {k: v for k, v in os.environ.items() if k.startswith("NVTE_")}}, handle)
    values = dict(DEFAULTS)
    index = 0
    while index < len(argv):
        flag = argv[index]
        if flag in NEGATIVE:
            values[NEGATIVE[flag]] = False
            index += 1
            continue
        dest = RENAMED.get(flag, flag[2:].replace("-", "_"))
        words = []
        while index + 1 < len(argv) and not argv[index + 1].startswith("--"):
            index += 1
            words.append(_value(argv[index]))
        values[dest] = True if not words else words[0] if len(words) == 1 or dest != "data_path" else words
        index += 1
    args = argparse.Namespace(**values)
    args.rank, args.world_size = int(os.getenv("RANK", "0")), int(os.getenv("WORLD_SIZE", "1"))
    return args


def validate_args(args, defaults=None):
    reject = os.environ.get("TPRIMAT_FAKE_REJECT")
    if reject:
        raise AssertionError(reject)
    model = args.tensor_model_parallel_size * args.pipeline_model_parallel_size * args.context_parallel_size
    assert args.world_size % model == 0, "world size is not divisible by TP*PP*CP"
    args.data_parallel_size = args.world_size // model
    if args.bf16 and not args.grad_reduce_in_bf16:  # the real rule the tests need to see caught
        args.accumulate_allreduce_grads_in_fp32 = True
    if args.save is not None:  # the real rule that made Primus need a save_interval
        assert args.save_interval is not None
    if args.lr_decay_iters is None:
        args.lr_decay_iters = args.train_iters
    return args


def _normal_(tensor, mean=0.0, std=1.0):
    """Stands in for torch.nn.init.normal_ (the init methods below are never called)."""
    return tensor


def core_transformer_config_from_args(args, config_class=None):
    """A config with the real init methods' shape: ``functools.partial(normal_, mean=0.0, std=...)``.

    The scaled std is ``init_method_std / sqrt(multiplier * num_layers)`` as megatron-core's
    ``scaled_init_method_normal``; ``TPRIMAT_FAKE_INIT_MULTIPLIER`` changes the multiplier (1 is
    megatron-core's rule for hybrid models) and ``TPRIMAT_FAKE_NO_CONFIG=<message>`` makes the
    build fail, so the tests see both caught. Like the real config, it refuses ``apply_rope_fusion`` when
    the RoPE kernel is absent (``TPRIMAT_FAKE_NO_FUSED_ROPE=1``), unless a probe stood one in.
    """
    failure = os.environ.get("TPRIMAT_FAKE_NO_CONFIG")
    if failure:
        raise ValueError(failure)
    from megatron.core.models.common.embeddings import rope_utils

    if args.apply_rope_fusion and rope_utils.fused_apply_rotary_pos_emb is None:
        # the real TransformerConfig.__post_init__ refuses the fusion without a kernel (issue 40)
        raise ValueError("stand-in: apply_rope_fusion without a fused RoPE kernel")
    multiplier = float(os.environ.get("TPRIMAT_FAKE_INIT_MULTIPLIER", "2"))
    std = args.init_method_std
    return argparse.Namespace(
        num_layers=args.num_layers, init_method_std=std,
        init_method=functools.partial(_normal_, mean=0.0, std=std),
        output_layer_init_method=functools.partial(_normal_, mean=0.0,
                                                   std=std / math.sqrt(multiplier * args.num_layers)))
