"""The ``torchrun`` command line every framework that starts its own ranks begins with."""

from __future__ import annotations

import sys

from utils.config.load import Config


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
