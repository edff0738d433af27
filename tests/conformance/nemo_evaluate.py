"""NeMo's own validation data path under tprimat's recipe, through a real Lightning fit, in the NeMo Python.

``python tests/conformance/nemo_evaluate.py REQUEST.json`` (run by path from the repository root). Issue 50 asks
whether every evaluation of a ``nemo`` job reads the same first EVAL_SAMPLES validation sequences (MLPerf's measure),
as the reference's NeMo does. This runs it: the recipe built from tprimat's overrides exactly as ``train/nemo/entry.py``
builds it (fiddle), its ``PreTrainingDataModule`` (which sizes the validation ``GPTDataset`` from the trainer's
``max_steps``, ``val_check_interval`` and ``limit_val_batches``) and its ``MegatronDataSampler``, whose
``transform_dataloader`` is what ``MegatronStrategy.process_dataloader`` calls on every loader
(``nemo/lightning/pytorch/strategies/megatron_strategy.py:579-584`` at v2.3.0); Lightning 2.4.0's own fit and
validation loops with the recipe's trainer settings; and tprimat's ``BenchmarkCallback`` with its
``EvaluationRecorder``, as the job attaches them.

Stand-ins: the fused-RoPE check (as train/nemo/probe.py); a world of one process (gloo) on cpu with the strategy
reduced to that one call (``MegatronStrategy`` needs CUDA and NCCL), which the recipe's layout makes exact when DP = 1
and GBS = MBS (one Lightning batch is one global batch, as NeMo's ``MegatronParallel`` reads it); and the model, a
fixed unigram model for validation (the same weights at every validation: only a separate parameter trains), logging
NeMo's ``val_loss`` as the per-micro-batch mean. The answer goes to ``REQUEST.json``'s ``out`` (JSON), the tokens each
validation read to ``out`` + ``.npz``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


def fixed_eval_module(vocab: int, seed: int = 0) -> Any:
    """A LightningModule whose validation loss depends on the samples only (its logits never train)."""
    import torch
    from lightning.pytorch import LightningModule

    class FixedEval(LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("logits", torch.randn(vocab, generator=torch.Generator().manual_seed(seed)))
            self.trained = torch.nn.Parameter(torch.zeros(1))
            self.read: list[list[np.ndarray]] = []

        def training_step(self, batch: dict, batch_idx: int) -> Any:
            return (self.trained - 1.0).pow(2).sum()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD([self.trained], lr=0.1)

        def on_validation_epoch_start(self) -> None:
            self.read.append([])

        def validation_step(self, batch: dict, batch_idx: int) -> None:
            tokens, labels = batch["tokens"], batch["labels"]
            self.read[-1].append(np.concatenate([tokens.numpy(), labels.numpy()[:, -1:]], axis=1))
            loss = (torch.logsumexp(self.logits, 0) - self.logits[labels]).mean()
            self.log("val_loss", loss, on_epoch=True, batch_size=tokens.shape[0])

    return FixedEval()


def run(request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The answer, and the tokens each validation read (``val<k>``)."""
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(request.get("port", 29541)))
    import fiddle as fdl
    import torch
    from lightning.pytorch import Trainer
    from lightning.pytorch.strategies import SingleDeviceStrategy
    from nemo.lightning import _strategy_lib

    from train.nemo.callback import EvaluationRecorder, LightningMeasurement, benchmark_callback_class
    from train.nemo.entry import build_recipe
    from train.nemo.recipe import NemoOverrides
    from train.settings.probe_common import stand_in_fused_rope
    from utils.config.load import load_config
    from utils.config.model import REPO_ROOT
    from utils.machine.hardware import collect_gpu_info
    from utils.result.file import new_result
    from utils.schema.measures import Source
    from utils.spec.models import workload_shape

    cfg = load_config(REPO_ROOT / "config.env", environ=request["config"])
    overrides = NemoOverrides.from_dict(json.loads(Path(request["overrides"]).read_text(encoding="utf-8")))
    stand_in_fused_rope()  # the recipe's model config refuses RoPE fusion without TE (train/nemo/probe.py does this)
    recipe = build_recipe(overrides)
    recipe.trainer.accelerator = "cpu"
    settings = recipe.trainer  # the recipe's trainer fields, as tprimat's overrides set them
    pretrain = fdl.build(recipe)
    data = pretrain.keywords["data"]
    # MegatronStrategy's own start-up (megatron_strategy.py:540, 559-577 at v2.3.0), in a world of one
    _strategy_lib.init_parallel_ranks(1, 0, 0, pretrain.keywords["trainer"].strategy.parallelism)
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    _strategy_lib.init_model_parallel()
    data.data_sampler.setup(0)

    class MegatronDataPath(SingleDeviceStrategy):
        def process_dataloader(self, dataloader: Any) -> Any:  # MegatronStrategy.process_dataloader's one call
            return data.data_sampler.transform_dataloader(dataloader)

    shape = workload_shape(cfg, "llama", vocab_size=overrides.fields["model.config.vocab_size"])
    result = new_result(cfg, platform="cpu", framework="nemo", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    measurement = LightningMeasurement(result=result, path=Path(request["out"] + ".result.json"), shape=shape,
                                       skip_steps=0, evaluation=EvaluationRecorder(cfg))
    trainer = Trainer(accelerator="cpu", devices=1, strategy=MegatronDataPath(device=torch.device("cpu")),
                      max_steps=settings.max_steps, val_check_interval=settings.val_check_interval,
                      limit_val_batches=settings.limit_val_batches, limit_test_batches=settings.limit_test_batches,
                      num_sanity_val_steps=settings.num_sanity_val_steps,
                      use_distributed_sampler=settings.use_distributed_sampler, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      callbacks=[benchmark_callback_class()(measurement)])
    module = fixed_eval_module(int(overrides.fields["model.config.vocab_size"]))
    trainer.fit(module, datamodule=data)
    sampler = trainer.val_dataloaders.batch_sampler
    quality = measurement.result.quality
    answer = {"validation_samples": data._validation_ds.num_samples, "sampler": type(sampler).__name__,
              "consumed_samples": sampler.consumed_samples, "limit_val_batches": settings.limit_val_batches,
              "val_check_interval": settings.val_check_interval, "status": measurement.result.status,
              "losses": [e.loss for e in quality.evaluations] if quality else [],
              "fixed_set": quality.fixed_set if quality else None}
    return answer, {f"val{k}": np.concatenate(read) for k, read in enumerate(module.read, start=1)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tests/conformance/nemo_evaluate.py",
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
