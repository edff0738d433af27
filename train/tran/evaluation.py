"""Held-out evaluation of ``tran`` and ``deep``: Megatron's validation samples, a per-token mean.

Every evaluation reads the same global samples ``[0, E)`` of the validation ``GPTDataset`` (train/rules/samples.py):
one fixed held-out set, MLPerf's measure (``nemo/lightning/pytorch/plugins/data_sampler.py:81`` at v2.1.0), so the
curve moves only because the weights do. A stop request is agreed over the ranks before every micro-batch: a rank
leaving alone would strand the others in a collective.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from train.megatron.inputs import index_cache_dir
from train.rules.samples import MegatronSamples, valid_num_samples
from utils.config.model import Config
from utils.dataset.paths import valid_prefix

# input ids [MBS, SL] -> logits [MBS, SL, vocab]
Forward = Callable[[torch.Tensor], torch.Tensor]


def valid_samples(cfg: Config, model: str, train_samples: Any) -> Any:
    """The validation split's :class:`~train.rules.samples.MegatronSamples` beside a model's training samples."""
    size = valid_num_samples(cfg.train_iters, cfg.eval_interval_steps, cfg.eval_samples)
    return MegatronSamples(valid_prefix(cfg, model), cfg.sl, cfg.seed, size, index_cache_dir(cfg),
                           train_samples.vocab_size, train_samples.eod, split="valid")


@dataclass
class Evaluator:
    """One rank's held-out evaluation: :meth:`run` evaluates the first EVAL_SAMPLES validation samples."""

    cfg: Config
    rank: int
    world_size: int
    device: torch.device
    data: Any  # the validation MegatronSamples
    forward: Forward
    set_training: Callable[[bool], None]
    done: int = 0  # evaluations run so far (each read the same samples)

    def agreed(self, asked: bool) -> bool:
        """Whether any rank was ``asked`` to stop: the same answer on every rank (one all-reduce of a flag)."""
        if self.world_size == 1:
            return asked
        flag = torch.tensor([float(asked)], device=self.device)
        dist.all_reduce(flag)
        return bool(flag.item() > 0)

    def sums(self, stopping: Callable[[], bool]) -> torch.Tensor | None:
        """[sum of token cross-entropies, token count] of this rank's held-out rows (float64); None: stopped"""
        cfg = self.cfg
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)
        for iteration in range(cfg.eval_iters):
            for micro in range(cfg.ga):
                if self.agreed(stopping()):
                    return None
                tokens = self.data.micro_batch(iteration, micro, rank=self.rank, dp=cfg.dp, mbs=cfg.mbs,
                                               ga=cfg.ga).to(self.device)
                targets = tokens[:, 1:]
                logits = self.forward(tokens[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                         targets.reshape(-1), reduction="sum")
                totals[0] += loss.double()
                totals[1] += targets.numel()
        return totals

    def run(self, stopping: Callable[[], bool] = lambda: False) -> float | None:
        """The per-token mean cross-entropy over the held-out set's EVAL_SAMPLES x SL tokens, the same on every rank;
        None when ``stopping()`` turned true on some rank during it."""
        self.set_training(False)
        try:
            with torch.no_grad():
                totals = self.sums(stopping)
            if totals is None:
                return None
            if self.world_size > 1:
                dist.all_reduce(totals)
        finally:
            self.set_training(True)
        self.done += 1
        return float(totals[0] / totals[1])  # one host read: the evaluation's end is synchronized
