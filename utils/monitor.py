"""Step measurement, the same for every framework: the synchronized step timer.

A step is timed from its start to its end with the device synchronized at both
ends, because GPU kernels run asynchronously and an unsynchronized clock measures
the launch queue, not the work (NeMo's own ``TimingCallback`` has that flaw).
Per-step arrays are kept whole; the summary over the measured (post-warm-up)
steps is computed by ``utils/metrics.py``, and the Lightning adapter around this
timer lives in ``train/nemo/callback.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from utils.metrics import finite

GIB = 1024**3


@dataclass
class StepRecord:
    step: int
    time_s: float
    loss: float | None
    lr: float | None
    memory_allocated_gb: float | None


@dataclass
class StepMonitor:
    """Framework-agnostic step timer: call :meth:`start_step` / :meth:`end_step` around each step.

    ``device`` is a ``torch.device`` (or None on cpu); CUDA/ROCm devices are
    synchronized before each clock read and their allocated memory is recorded.
    """

    device: Any = None
    clock: Callable[[], float] = time.perf_counter
    records: list[StepRecord] = field(default_factory=list)
    _started: float | None = None

    @property
    def _on_gpu(self) -> bool:
        return self.device is not None and getattr(self.device, "type", None) == "cuda"

    def _sync(self) -> None:
        if self._on_gpu:
            import torch

            torch.cuda.synchronize(self.device)

    def _allocated_gb(self) -> float | None:
        if self._on_gpu:
            import torch

            return torch.cuda.memory_allocated(self.device) / GIB
        return None

    def start_step(self) -> None:
        self._sync()
        self._started = self.clock()

    def end_step(self, loss: float | None = None, lr: float | None = None) -> StepRecord:
        if self._started is None:
            raise RuntimeError("end_step() called without start_step()")
        self._sync()
        elapsed = self.clock() - self._started
        self._started = None
        record = StepRecord(
            step=len(self.records) + 1,
            time_s=elapsed,
            loss=None if loss is None else float(loss),
            lr=None if lr is None else float(lr),
            memory_allocated_gb=self._allocated_gb(),
        )
        self.records.append(record)
        return record

    def peak_memory(self) -> tuple[float | None, float | None]:
        """(peak allocated, peak reserved) in GiB on a GPU; (None, None) on cpu."""
        if self._on_gpu:
            import torch

            return (torch.cuda.max_memory_allocated(self.device) / GIB,
                    torch.cuda.max_memory_reserved(self.device) / GIB)
        return None, None

    def arrays(self) -> dict[str, list[float | None]]:
        """Per-step arrays in the result's names (non-finite values become null)."""
        return {
            "step_times": [r.time_s for r in self.records],
            "loss_values": [finite(r.loss) for r in self.records],
            "learning_rates": [finite(r.lr) for r in self.records],
            "memory_allocated_gb": [r.memory_allocated_gb for r in self.records],
        }
