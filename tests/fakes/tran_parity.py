"""Run under torchrun by tests/unit/train/frameworks/test_tran_fsdp.py: the same tiny tran job under FSDP2 and
under DDP, one after the
other in the same ranks, and (rank 0) the two loss curves and FSDP2's read-back settings as JSON.

Usage: ``python -m torch.distributed.run --nproc-per-node 2 -m tests.fakes.tran_parity --model llama --out F``
with the tiny workload's config in the environment (tests/helpers/workload.py ``tiny_environ``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch.distributed as dist

from train.tran.step import Trainer
from train.tran.worker import exit_worker, reduce_loss, setup_distributed
from utils.config.load import load_config


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cfg = load_config()
    info = setup_distributed(cfg, "cpu")
    curves: dict[str, list[float]] = {}
    settings = {}
    for sharding in ("fsdp2", "ddp"):
        trainer = Trainer(cfg, args.model, info, sharding=sharding)
        if sharding == "fsdp2":
            settings = trainer.effective_settings().settings
            local = [p.to_local().numel() for p in trainer.model.parameters()]
            full = [p.numel() for p in trainer.model.parameters()]
            settings["local_elements"], settings["full_elements"] = sum(local), sum(full)
        curves[sharding] = [float(reduce_loss(trainer.step(index), False, info)[0]) for index in range(cfg.train_iters)]
    if info.rank == 0:
        args.out.write_text(json.dumps({"curves": curves, "settings": settings}), encoding="utf-8")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_worker(main())  # as the real worker ends: see its docstring (train/tran/worker.py)
