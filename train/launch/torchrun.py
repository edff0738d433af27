"""The ``torchrun`` command line every framework that starts its own ranks begins with."""

from __future__ import annotations

import sys

from utils.config.model import Config


def torchrun_argv(cfg: Config, nproc_per_node: int | None = None) -> list[str]:
    """``torchrun`` (as ``python -m torch.distributed.run``) with the config's rendezvous arguments.

    Multi-node runs (NNODES>1) pass ``--nnodes/--node-rank/--master-addr/--master-port``
    so every node joins the same job; single-node runs pass the same arguments,
    which keeps the command identical in shape.
    """
    return [
        sys.executable, "-m", "torch.distributed.run",
        f"--nproc-per-node={nproc_per_node or cfg.gpus_per_node}",
        f"--nnodes={cfg.nnodes}",
        f"--node-rank={cfg.node_rank}",
        f"--master-addr={cfg.master_addr}",
        f"--master-port={cfg.master_port}",
    ]


def worker_argv(cfg: Config, platform: str, module: str) -> tuple[list[str], dict[str, str]]:
    """How a ``tran``/``deep`` worker module starts: the command and the variables tprimat sets for it.

    A one-process cpu job starts the worker itself with the variables torchrun would give it, sparing torchrun's own
    interpreter (about 4 s a job on the 2-core host: docs/PERFORMANCE.md, "The quick benchmark"); every other job keeps
    torchrun.
    """
    if platform == "cpu" and cfg.nnodes == 1 and cfg.gpus_per_node == 1:
        env = {"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0", "ROLE_RANK": "0", "WORLD_SIZE": "1",
               "LOCAL_WORLD_SIZE": "1", "ROLE_WORLD_SIZE": "1", "MASTER_ADDR": cfg.master_addr,
               "MASTER_PORT": str(cfg.master_port)}
        return [sys.executable, "-m", module], env
    return [*torchrun_argv(cfg), "-m", module], {}

