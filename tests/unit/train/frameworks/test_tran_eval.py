"""tran and deep evaluate alike (issue 34) and on one fixed held-out set (issue 50).

Both trainers are built in-process on cpu with the same SEED (the same initial weights: train/tran/step.py) and
evaluate the first EVAL_SAMPLES validation samples through their own forward (tran: FSDP2 at PRECISION; deep: the
DeepSpeed engine); train/tran/evaluation.py reduces both. Every evaluation reads those same samples (MLPerf's
measure), so two evaluations of the same weights give the same loss on each stack.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests.helpers.proc import free_port
from tests.helpers.workload import tiny_environ
from train.rules.samples import valid_num_samples
from train.tran.step import Dist, Trainer
from utils.config.load import load_config
from utils.config.model import Config

EVAL = {"EVAL_INTERVAL": "16", "EVAL_SAMPLES": "8"}  # every 4 steps of GBS 4, two global batches


@pytest.fixture
def eval_cfg(sample_data_dir: Path, tmp_path: Path) -> Callable[..., Config]:
    def make(**overrides: str) -> Config:
        return load_config(environ=tiny_environ(sample_data_dir, tmp_path / "out", **{**EVAL, **overrides}))

    return make


def test_megatrons_validation_size() -> None:
    # get_train_valid_test_num_samples: (train_iters // eval_interval + 1) x eval_iters x GBS
    assert valid_num_samples(12, 4, 8) == 32


@pytest.mark.slow
def test_tran_and_deep_give_the_same_eval_loss_on_the_same_weights(eval_cfg: Callable[..., Config],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("deepspeed")
    from train.deep.plugin import deepspeed_config
    from train.deep.worker import DeepSpeedTrainer

    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "LOCAL_RANK": "0",
                       "WORLD_SIZE": "1", "DS_ACCELERATOR": "cpu"}.items():
        monkeypatch.setenv(key, value)
    cfg = eval_cfg()
    info = Dist(0, 0, 1, torch.device("cpu"))
    try:
        tran = Trainer(cfg, "llama", info)
        tran_eval = tran.evaluator()
        tran_loss = tran_eval.run()
        assert tran_eval.done == 1 and tran.model.training  # back in training mode after the evaluation
        tran_again = tran_eval.run()
        deep = DeepSpeedTrainer(cfg, "llama", info, deepspeed_config(cfg))
        deep_eval = deep.evaluator()
        deep_loss, deep_again = deep_eval.run(), deep_eval.run()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert 0 < tran_loss < 12 and deep_loss == pytest.approx(tran_loss, rel=1e-4)
    # one fixed held-out set: the second evaluation of the same weights reads the same samples, to the bit
    assert tran_again == tran_loss and deep_again == deep_loss


def test_every_evaluation_reads_the_first_eval_samples_in_megatrons_order(eval_cfg: Callable[..., Config]) -> None:
    """Issue 50: evaluation k reads global steps 0..EVAL_ITERS-1 of the validation order, every time (MLPerf's fixed
    set; the old code read block k)."""
    from train.tran.evaluation import Evaluator

    cfg = eval_cfg()
    read: list[tuple[int, int]] = []

    class Data:
        def micro_batch(self, step: int, micro: int, **_: int) -> torch.Tensor:
            read.append((step, micro))
            return torch.full((cfg.mbs, cfg.sl + 1), (step * cfg.ga + micro) % 16, dtype=torch.long)

    def forward(ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(ids, 16).float()

    evaluator = Evaluator(cfg, 0, 1, torch.device("cpu"), Data(), forward, lambda training: None)
    first, second = evaluator.run(), evaluator.run()
    once = [(step, micro) for step in range(cfg.eval_iters) for micro in range(cfg.ga)]
    assert read == once + once and first == second and evaluator.done == 2


@pytest.mark.slow
def test_a_nan_eval_loss_is_recorded_and_stops_the_run(eval_cfg: Callable[..., Config], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse
    import math

    from train.tran.evaluation import Evaluator
    from train.tran.worker import StopRequest, train
    from utils.result.file import read_result

    monkeypatch.setattr(Evaluator, "run", lambda self, *_: math.nan)
    path = tmp_path / "train_cpu_tran_llama.json"
    args = argparse.Namespace(model="llama", platform="cpu", result=path, run_index=None, log_path=None)
    with pytest.raises(FloatingPointError, match="not finite"):
        train(eval_cfg(TRAIN_ITERS="6", EVAL_INTERVAL="8", EVAL_SAMPLES="4"), args, Dist(0, 0, 1, torch.device("cpu")),
              StopRequest())
    result = read_result(path)
    quality = result.quality
    assert result.status == "failed" and "eval loss at step 2 is not finite" in result.error
    assert len(result.step_times) == 2 and quality is not None and not quality.reached
    assert quality.evaluations[0].loss is None and "nan" in quality.evaluations[0].loss_reason
