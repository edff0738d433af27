"""Megatron-LM's own evaluation path on tprimat's ``pretrain_gpt.py`` argv, run twice, in the framework's Python.

``python tests/conformance/megatron_evaluate.py REQUEST.json`` (run by path from the repository root, the tree named
in the request first on ``sys.path``). Issue 50 asks whether evaluation ``k`` of a ``mega`` job reads the same held-out
samples each time (MLPerf's measure). Reading the code says no; this runs it: Megatron's ``parse_args`` and
``validate_args`` on the argv, ``pretrain_gpt.py``'s own dataset provider, ``build_train_valid_test_data_iterators``
(where ``--full-validation`` sizes the set and overwrites ``eval_iters``), then ``evaluate()`` itself with
``pretrain_gpt.py``'s ``forward_step`` and ``loss_func`` through Megatron's no-pipelining schedule, once per requested
evaluation, recording the tokens each evaluation read and the loss it reported.

Stand-ins, all outside the data path: a world of one process (gloo) on cpu, so DP = 1 and an evaluation reads
``GBS / MBS`` micro-batches per iteration; CUDA calls run on the cpu (tensors asked on ``cuda`` are made on the cpu,
``.cuda()`` returns the tensor, no synchronisation); Megatron's timers are off; and the GPT model is a fixed
unigram model (the same weights at every evaluation) that returns each token's cross-entropy, as ``GPTModel`` does
when it is given labels. The answer (one JSON object) goes to ``REQUEST.json``'s ``out``; the tokens read to
``out`` + ``.npz`` (``eval<k>``: each sample's SL tokens and its last label, in the order read).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Any

import numpy as np


def cuda_on_cpu() -> Any:
    """The stand-in that runs Megatron's CUDA calls on the cpu (a torch function mode, entered by the caller)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.cuda:
                return args[0]
            if "cuda" in str(kwargs.get("device", "")):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    return CudaOnCpu()


class NoTimers:
    """Megatron's timers, off (a timer's start would synchronise the device and gather times across ranks)."""

    def __call__(self, *args: Any, **kwargs: Any) -> NoTimers:
        return self

    def start(self, *args: Any, **kwargs: Any) -> None:
        return None

    stop = log = start


def unigram_model(config: Any, vocab: int, seed: int = 0) -> Any:
    """A GPT model stand-in with fixed weights: one logit per vocabulary entry, the same for every position."""
    import torch

    class Unigram(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config, self.vp_stage, self.model_type = config, None, None
            self.logits = torch.nn.Parameter(torch.randn(vocab, generator=torch.Generator().manual_seed(seed)))
            self.read: list[np.ndarray] = []

        def set_input_tensor(self, tensor: Any) -> None:
            return None

        def forward(self, tokens, position_ids, attention_mask, labels=None, loss_mask=None):
            self.read.append(np.concatenate([tokens.numpy(), labels.numpy()[:, -1:]], axis=1))
            return torch.logsumexp(self.logits, 0) - self.logits[labels]  # [b, s]: each token's cross-entropy

    return Unigram()


def run(request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The answer, and the tokens each evaluation read (``eval<k>``)."""
    tree = request["tree"]
    sys.path.insert(0, tree)
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(request.get("port", 29531)))
    import torch

    from train.settings.probe_common import stand_in_device_arch, stand_in_fused_rope
    from train.settings.sample_probe import ensure_dataset_helpers

    mode = cuda_on_cpu()
    mode.__enter__()
    stand_in_device_arch(int(request.get("device_arch", 9)))
    from megatron.training.arguments import parse_args, validate_args

    sys.argv = ["pretrain_gpt.py", *request["argv"]]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = parse_args()
    except SystemExit:  # argparse refused an argument: its last line says which
        return {"parse_args": said.getvalue().strip().splitlines()[-1]}, {}
    validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
    ensure_dataset_helpers()
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.training import global_vars, training

    parallel_state.initialize_model_parallel()
    global_vars.set_global_variables(args)
    global_vars._GLOBAL_TIMERS = NoTimers()
    import pretrain_gpt

    provider = pretrain_gpt.train_valid_test_datasets_provider
    provider.is_distributed = True  # as pretrain_gpt.py's __main__ sets it
    # what setup_model_and_optimizer sets without --load (training.py:1180 at 847781764f, l.1175 at core_v0.12.0)
    args.iteration, args.num_floating_point_operations_so_far = 0, 0
    asked = args.eval_iters
    _, valid, _ = training.build_train_valid_test_data_iterators(provider)
    answer: dict[str, Any] = {"eval_iters_asked": asked, "eval_iters": args.eval_iters,
                              "global_batch_size": args.global_batch_size, "micro_batch_size": args.micro_batch_size,
                              "data_parallel_size": args.data_parallel_size, "evaluations": []}
    stand_in_fused_rope()
    from megatron.training.arguments import core_transformer_config_from_args

    model = unigram_model(core_transformer_config_from_args(args), args.padded_vocab_size)
    arrays = {}
    for k in range(1, int(request["evaluations"]) + 1):
        model.read = []
        try:
            losses, _, _ = training.evaluate(pretrain_gpt.forward_step, valid, [model], None, model.config)
        except StopIteration:
            answer["stop_iteration"] = {"evaluation": k, "micro_batches_read": len(model.read)}
            break
        arrays[f"eval{k}"] = np.concatenate(model.read)
        answer["evaluations"].append({"loss": float(losses["lm loss"]), "samples": len(arrays[f"eval{k}"])})
    mode.__exit__(None, None, None)
    return answer, arrays


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tests/conformance/megatron_evaluate.py",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("request", metavar="REQUEST.json")
    options = parser.parse_args(argv)
    with open(options.request, encoding="utf-8") as handle:
        request = json.load(handle)
    answer, arrays = run(request)
    np.savez(request["out"] + ".npz", **arrays)
    with open(request["out"], "w", encoding="utf-8") as handle:
        json.dump(answer, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())

