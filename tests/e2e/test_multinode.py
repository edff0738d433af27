"""Multi-node on one machine: two "nodes" of one CPU process each, rendezvous over localhost.

Each node is a separate ``train/train_cpu_tran_llama.sh`` invocation with NNODES=2 and its own
NODE_RANK, exactly as shell/slurm.sbatch starts one per node; train/launch/launcher.py turns that into
``torchrun --nnodes=2 --node-rank=<r> --master-addr --master-port``. DDP with gloo then has to
connect both, so a finished ok result proves the rendezvous arguments are right.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import free_port
from tests.helpers.workload import tiny_environ

LAUNCHER = REPO / "train" / "train_cpu_tran_llama.sh"
PREREQUISITES = ("train/launch/launcher.py", "train/tran/worker.py", "shell/data.sh")
TWO_NODES = {"NNODES": "2", "GPUS_PER_NODE": "1", "DP": "2", "GA": "1", "MBS": "2", "MODELS": "llama",
             "TRAIN_ITERS": "6", "WARMUP_STEPS": "1"}


def _require(*paths: str) -> None:
    missing = [p for p in paths if not (REPO / p).exists()]
    if missing:
        pytest.skip(f"prerequisite not in the repository yet: {', '.join(missing)}")


@pytest.mark.parametrize("rank", ["0", "1"])
def test_each_node_gets_the_rendezvous_arguments(tmp_path: Path, rank: str) -> None:
    _require("train/launch/launcher.py")
    port = str(free_port())
    env = tiny_environ(tmp_path / "data", tmp_path / "out", **TWO_NODES, NODE_RANK=rank, MASTER_PORT=port)
    proc = subprocess.run(["bash", str(LAUNCHER), "--dry-run"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    command = next(line for line in proc.stdout.splitlines() if "torch.distributed.run" in line or "torchrun" in line)
    argv = command.split()
    for arg in ("--nnodes=2", f"--node-rank={rank}", "--master-addr=127.0.0.1", f"--master-port={port}",
                "--nproc-per-node=1"):
        assert arg in argv, f"{arg} missing from {command}"


@pytest.mark.slow
def test_two_nodes_on_localhost_train_together(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    _require(*PREREQUISITES)
    tiny_env: Callable[..., dict[str, str]] = request.getfixturevalue("tiny_env")
    port = str(free_port())
    procs = []
    for rank in ("0", "1"):
        env = tiny_env(**TWO_NODES, NODE_RANK=rank, MASTER_PORT=port)
        log = (tmp_path / f"node{rank}.log").open("w")
        procs.append((rank, subprocess.Popen(["bash", str(LAUNCHER)], env=env, cwd=REPO, stdout=log,
                                             stderr=subprocess.STDOUT), log))
    codes = {}
    for rank, proc, log in procs:
        try:
            codes[rank] = proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    logs = {rank: (tmp_path / f"node{rank}.log").read_text()[-3000:] for rank in codes}
    assert codes == {"0": 0, "1": 0}, logs

    result_file = Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json"
    result = json.loads(result_file.read_text())
    assert result["status"] == "ok", result.get("error")
    config = result["training_config"]
    assert (config["nnodes"], config["gpus_per_node"], config["num_gpus"], config["global_batch_size"]) == (2, 1, 2, 4)
    assert len(result["step_times"]) == 6
    assert all(isinstance(loss, float) for loss in result["loss_values"])
