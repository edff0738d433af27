"""The eval loss tran and deep record is the per-token cross-entropy, checked against one computed by hand.

tests/unit/train/frameworks/test_tran_eval.py shows tran and deep agree; an error they share (a token miscounted in
train/tran/evaluation.py, a mean taken per batch) would agree too. Here a tiny model evaluates through the real
:class:`train.tran.evaluation.Evaluator`, and the loss is recomputed from its logits in plain Python: for every
predicted token, log(sum(exp(logits))) - logit[target], summed, divided by the number of predicted tokens.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from train.tran.evaluation import Evaluator

VOCAB, WIDTH, SL = 11, 8, 7


class _Samples:
    """Held-out token rows, a different batch per (step, micro); each batch served is kept for the hand check."""

    def __init__(self) -> None:
        self.served: list[torch.Tensor] = []

    def micro_batch(self, step: int, micro: int, *, rank: int, dp: int, mbs: int, ga: int) -> torch.Tensor:
        rows = torch.Generator().manual_seed(1000 * step + 10 * micro + rank)
        batch = torch.randint(0, VOCAB, (mbs, SL + 1), generator=rows)
        self.served.append(batch)
        return batch


def _by_hand(model: torch.nn.Module, batches: list[torch.Tensor]) -> float:
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            logits = model(batch[:, :-1]).double().tolist()
            for row, targets in zip(logits, batch[:, 1:].tolist(), strict=True):
                for z, target in zip(row, targets, strict=True):
                    total += math.log(sum(math.exp(v) for v in z)) - z[target]
                    count += 1
    return total / count


def test_the_eval_loss_is_the_per_token_cross_entropy_by_hand() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Linear(WIDTH, VOCAB))
    samples = _Samples()
    cfg = SimpleNamespace(eval_iters=2, ga=3, dp=1, mbs=2)  # 2 x 3 micro-batches of 2 rows of 7 predicted tokens
    evaluator = Evaluator(cfg, 0, 1, torch.device("cpu"), samples, model, model.train)
    loss = evaluator.run()
    assert len(samples.served) == 6 and model.training  # every micro-batch of the evaluation, training mode back
    assert math.isclose(loss, _by_hand(model, samples.served), rel_tol=1e-6), (loss, _by_hand(model, samples.served))
