"""tran's LR schedule against megatron-core's own scheduler, step by step.

Megatron's ``OptimizerParamScheduler`` starts at ``num_steps = 0`` and advances after
every optimizer step, so iteration k (1-based) trains with the rate after k-1 steps.
tran must apply the same rate at the same step, or the reference run trains on a
schedule shifted by one step from the mega/prim runs it is compared with.
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import pytest

from train.rules.schedule import lr_at
from utils.config.model import Config


def megatron_applied_rates(cfg: Config) -> list[float]:
    """The rate each Megatron iteration 1..TRAIN_ITERS trains with (samples-based, as pretrain_gpt.py does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    optimizer = SimpleNamespace(param_groups=[{"lr": None, "weight_decay": 0.0}])
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=cfg.lr, min_lr=cfg.min_lr, lr_warmup_steps=cfg.warmup_steps * cfg.gbs,
        lr_decay_steps=cfg.train_iters * cfg.gbs, lr_decay_style=cfg.lr_decay, start_wd=0.0, end_wd=0.0,
        wd_incr_steps=cfg.train_iters * cfg.gbs, wd_incr_style="constant")
    rates = []
    for _ in range(cfg.train_iters):
        rates.append(optimizer.param_groups[0]["lr"])  # what this iteration's optimizer.step() uses
        scheduler.step(increment=cfg.gbs)
    return rates


@pytest.mark.parametrize("decay", ["cosine", "linear", "constant"])
def test_tran_applies_megatrons_rate_at_every_step(decay: str) -> None:
    cfg = Config(lr=3e-3, min_lr=3e-4, warmup_steps=3, train_iters=12, lr_decay=decay, mbs=2, ga=2, dp=1,
                 gpus_per_node=1)
    # Trainer.step(index) and the recorded learning_rates use lr_at(index) for 0-based step index.
    tran = [lr_at(index, cfg) for index in range(cfg.train_iters)]
    assert tran == pytest.approx(megatron_applied_rates(cfg), rel=1e-12, abs=1e-15)
    assert tran[0] == 0.0  # Megatron's first iteration trains at the warm-up's initial rate


def test_trainer_step_sets_the_rate_of_completed_steps() -> None:
    """``Trainer.step(index)`` writes ``lr_at(index)`` into the optimizer before it steps."""
    from train.tran.step import Trainer

    cfg = Config(lr=1.0, min_lr=0.0, warmup_steps=4, train_iters=10, dp=1, gpus_per_node=1)
    seen: list[float] = []

    class Stop(Exception):
        pass

    class FakeData:
        def micro_batch(self, *args, **kwargs):
            seen.append(trainer.optimizer.param_groups[0]["lr"])
            raise Stop

    trainer = Trainer.__new__(Trainer)  # no model or dataset needed to see the rate it sets
    trainer.cfg, trainer.data = cfg, FakeData()
    trainer.dist_info = SimpleNamespace(device=None, rank=0, world_size=1)
    trainer.optimizer = SimpleNamespace(param_groups=[{"lr": math.nan}])
    for index in (0, 1, 4):
        with pytest.raises(Stop):
            trainer.step(index)
    assert seen == [0.0, 0.25, 1.0]
