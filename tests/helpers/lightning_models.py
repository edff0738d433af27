"""Tiny Lightning modules for tests/unit/train/frameworks/test_lightning_callback.py (BenchmarkCallback in real
Lightning runs on cpu).

Why a module of their own: a class that subclasses ``LightningModule`` needs lightning at import, and lightning with
what it imports (torch._dynamo among them) took about 9 s of CPU at every pytest collection; collected in each
xdist worker, it cost the workers that never run these tests that much each. The test module imports this one in its
tests, so only the worker that runs them imports lightning.
"""

from __future__ import annotations

import time

import torch
from lightning.pytorch import LightningModule


class TinyRegression(LightningModule):
    """A linear model fitting a fixed linear map over ``steps`` batches of 64; the first ``slow_steps`` steps sleep
    ``warmup_sleep`` seconds each (a fake warm-up)."""

    def __init__(self, *, steps: int, slow_steps: int, warmup_sleep: float, fail_at: int | None = None,
                 nan_at: int | None = None, interrupt_at: int | None = None):
        super().__init__()
        self.steps, self.warmup_sleep = steps, warmup_sleep
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(16, 4)
        self.target = torch.randn(16, 4)
        self.slow_steps, self.fail_at, self.nan_at, self.interrupt_at = slow_steps, fail_at, nan_at, interrupt_at
        self.losses: list[float] = []
        self.lrs: list[float] = []

    def train_dataloader(self):
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(64 * self.steps, 16, generator=generator)
        data = torch.utils.data.TensorDataset(x, x @ self.target)
        return torch.utils.data.DataLoader(data, batch_size=64)

    def training_step(self, batch, batch_idx):
        step = self.global_step + 1
        if step <= self.slow_steps:
            time.sleep(self.warmup_sleep)
        if step == self.fail_at:
            raise RuntimeError("CUDA out of memory (simulated)")
        if step == self.interrupt_at:
            raise KeyboardInterrupt
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        if step == self.nan_at:
            loss = loss * float("nan")
        self.losses.append(float(loss.detach()))
        self.lrs.append(self.trainer.optimizers[0].param_groups[0]["lr"])
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.05, betas=(0.9, 0.95), weight_decay=0.0)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}


class ValidatedRegression(TinyRegression):
    """TinyRegression with NeMo's ``val_loss`` logged each validation: the k-th validation's value is given."""

    def __init__(self, val_losses: list[float], *, steps: int):
        super().__init__(steps=steps, slow_steps=0, warmup_sleep=0.0)
        self.val_losses, self.validations = val_losses, 0

    def val_dataloader(self):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(2))
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x @ self.target), batch_size=4)

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", torch.tensor(self.val_losses[self.validations]), on_epoch=True)

    def on_validation_epoch_end(self):
        self.validations += 1


class RestartingSampler:
    """The shape of NeMo's ``MegatronPretrainingSampler`` (nemo/lightning/data.py:344-361 at v2.3.0): micro-batches of
    sample indices from ``consumed_samples`` on, which NeMo sets to 0 for a validation loader; a caller that wanted
    another block would have to move ``consumed_samples``."""

    def __init__(self, total: int, micro: int) -> None:
        self.total, self.micro, self.consumed_samples = total, micro, 0

    def __iter__(self):
        indices = range(self.consumed_samples, self.total)
        return iter([list(indices[i:i + self.micro]) for i in range(0, len(indices) - self.micro + 1, self.micro)])

    def __len__(self) -> int:
        return (self.total - self.consumed_samples) // self.micro


class SampledValidation(ValidatedRegression):
    """ValidatedRegression whose validation loader draws from a :class:`RestartingSampler`: each validation's sample
    indices are recorded in ``read`` (one list per validation)."""

    def __init__(self, val_losses: list[float], *, steps: int):
        super().__init__(val_losses, steps=steps)
        self.sampler = RestartingSampler(total=32, micro=4)
        self.read: list[list[int]] = []

    def val_dataloader(self):
        data = torch.utils.data.TensorDataset(torch.arange(32))
        return torch.utils.data.DataLoader(data, batch_sampler=self.sampler)

    def on_validation_epoch_start(self):
        self.read.append([])

    def validation_step(self, batch, batch_idx):
        self.read[-1] += batch[0].tolist()
        super().validation_step(batch, batch_idx)
