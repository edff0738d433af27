"""tran on FSDP2 (train/tran/shard.py, train/tran/step.py): sharded, the same loss curve as DDP, compiled on request.

Two gloo ranks train the tiny Llama under FSDP2 and then under DDP (``tests/fakes/tran_parity.py``, the same
samples, seed and schedule). FSDP2 computes in bf16 weights without autocast while DDP keeps fp32 weights under
bf16 autocast, so the curves are not bit-identical: every step's loss must agree within 0.1% (measured on the
2-core VM, 8 steps: at most 0.007%, losses 7.64 -> 6.86), and both must learn.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.helpers.paths import REPO
from tests.helpers.proc import PYTHON
from train.tran.step import Dist
from utils.config.model import Config
from utils.result.file import read_result

LOSS_TOLERANCE = 1e-3  # relative, per step


@pytest.mark.slow
def test_two_ranks_fsdp2_shards_and_matches_ddp(tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    import subprocess

    out = tmp_path / "parity.json"
    env = tiny_env(DP="2", GPUS_PER_NODE="2", GA="2", MBS="2", TRAIN_ITERS="8", OMP_NUM_THREADS="1")
    proc = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--nproc-per-node=2", "--master-addr=127.0.0.1",
                           f"--master-port={env['MASTER_PORT']}", "-m", "tests.fakes.tran_parity", "--model", "llama",
                           "--out", str(out)], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    fsdp, ddp = data["curves"]["fsdp2"], data["curves"]["ddp"]
    assert len(fsdp) == len(ddp) == 8
    for step, (a, b) in enumerate(zip(fsdp, ddp, strict=True), start=1):
        assert abs(a - b) <= LOSS_TOLERANCE * b, (step, a, b)
    assert fsdp[-1] < fsdp[0] and ddp[-1] < ddp[0]
    settings = data["settings"]
    # Read back from the built model: every parameter a DTensor sharded over both ranks, half of it held here.
    assert settings["sharding"] == "FSDP2 (fully_shard)" and settings["shard_ranks"] == 2
    assert settings["fully_shard_modules"] == 3  # two decoder layers + the root
    assert (settings["param_dtype"], settings["grad_reduce_dtype"], settings["master_dtype"]) == ("bf16", "fp32",
                                                                                                 "fp32")
    sharded, total = settings["sharded_parameters"].split(" of ")
    assert sharded == total
    assert settings["local_elements"] * 2 == pytest.approx(settings["full_elements"], rel=0.01)


@pytest.fixture
def sample_cfg(sample_data_dir: Path, tmp_path: Path) -> Callable[..., Config]:
    import shutil

    from tests.helpers.workload import tiny_environ
    from utils.config.load import load_config

    shutil.copytree(sample_data_dir, tmp_path / "data")  # tran writes its index cache under DATA_DIR

    def make(**overrides: str) -> Config:
        return load_config(environ=tiny_environ(sample_data_dir, tmp_path / "out", DATA_DIR=str(tmp_path / "data"),
                                                **overrides))

    return make


@pytest.mark.slow
def test_compile_on_cpu_records_its_time_apart_from_the_steps(sample_cfg: Callable[..., Config],
                                                             tmp_path: Path) -> None:
    from train.tran.worker import StopRequest, train

    cfg = sample_cfg(TRAN_COMPILE="true", TRAIN_ITERS="3", MODEL_LAYERS="1", MODELS="llama", MEASURE_SKIP_STEPS="1")
    path = tmp_path / "out" / "train_cpu_tran_llama.json"
    args = argparse.Namespace(model="llama", platform="cpu", result=path, run_index=None, log_path=None)
    train(cfg, args, Dist(0, 0, 1, torch.device("cpu")), StopRequest())
    result = read_result(path)
    assert result.status == "ok", result.error
    config = result.training_config
    assert config.compiled is True and config.compile_time_seconds is not None and config.compile_time_seconds > 0
    # The compile pass is not a step: three steps recorded, the first one not carrying the compile.
    assert len(result.step_times) == 3 and result.step_times[0] < config.compile_time_seconds
    assert result.effective_settings.settings["compile"] is True
    assert result.model_shape.num_layers == 1 and result.model_shape.proxy_of_layers == 2
    assert result.training_config.model_layers == 1


def test_cpu_default_is_eager(sample_cfg: Callable[..., Config]) -> None:
    assert not sample_cfg().tran_compile_on("cpu")
