"""Training samples for the ``tran`` reference: seeded SL+1 windows over a Megatron indexed dataset.

Why not megatron-core's ``GPTDataset``: it needs ``BlendedMegatronDatasetBuilder``,
a writable index cache and the compiled ``helpers`` C++ extension (built with a
compiler and pybind11 at run time), none of which a fresh CPU virtualenv has. The
file format is what must be shared, so the ``.bin``/``.idx`` written by
``data/encode.py`` is read here with megatron-core's own ``IndexedDataset``, and
sampling stays a few lines anyone can check:

* the documents (each already ends with EOD) are read as one packed token stream,
  as Megatron does with its default ``reset_attention_mask=False``;
* window ``w`` holds tokens ``[w*SL, w*SL + SL + 1)``: SL inputs plus the next token
  for each, and consecutive windows share one boundary token;
* windows are visited in a permutation drawn from ``numpy.random.default_rng([SEED, epoch])``,
  so the same SEED gives the same samples on every machine, and a run longer than
  one epoch reshuffles instead of repeating the order;
* global sample ``g`` for optimizer step ``s``, micro-batch ``m``, DP rank ``r`` is
  ``(s*GA + m) * MBS*DP + r*MBS + b`` for ``b < MBS``: the ranks never read the same
  sample, and the global sample order does not depend on how many ranks read it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch


@dataclass
class TokenWindows:
    """Seeded windows of ``seq_len + 1`` tokens over the packed stream of ``prefix.{bin,idx}``."""

    prefix: Path
    seq_len: int
    seed: int
    _permutations: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        missing = [p for p in (Path(f"{self.prefix}.bin"), Path(f"{self.prefix}.idx")) if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"Megatron dataset missing: {', '.join(map(str, missing))}; prepare the data first "
                "(./shell/data.sh, e.g. DATASET=sample ./shell/data.sh)"
            )
        with warnings.catch_warnings():  # megatron.core's package import warns about optional TE/Apex
            warnings.filterwarnings("ignore", message="Transformer Engine and Apex are not installed")
            from megatron.core.datasets.indexed_dataset import IndexedDataset

        self.dataset = IndexedDataset(str(self.prefix), mmap=True)
        lengths = np.asarray(self.dataset.sequence_lengths, dtype=np.int64)
        # starts[i] is the stream offset of sequence i; starts[-1] the stream length.
        self.starts = np.concatenate([[0], np.cumsum(lengths)])
        self.total_tokens = int(self.starts[-1])
        self.num_windows = (self.total_tokens - 1) // self.seq_len
        if self.num_windows < 1:
            raise ValueError(
                f"{self.prefix}: {self.total_tokens} tokens cannot fill one sample of SL+1={self.seq_len + 1} "
                "tokens; use a larger dataset (DATA_SAMPLES, SAMPLE_MB) or a smaller SL"
            )

    def window(self, index: int) -> np.ndarray:
        """Tokens ``[index*SL, index*SL + SL + 1)`` of the stream, crossing document boundaries."""
        position, wanted = index * self.seq_len, self.seq_len + 1
        sequence = int(np.searchsorted(self.starts, position, side="right")) - 1
        pieces = []
        while wanted > 0:
            offset = position - int(self.starts[sequence])
            take = min(wanted, int(self.starts[sequence + 1]) - position)
            pieces.append(self.dataset.get(sequence, offset=offset, length=take))
            position, wanted, sequence = position + take, wanted - take, sequence + 1
        return np.concatenate(pieces).astype(np.int64)

    def window_index(self, global_sample: int) -> int:
        """Which window global sample ``g`` reads: a fresh seeded permutation per epoch."""
        epoch, within = divmod(global_sample, self.num_windows)
        if epoch not in self._permutations:
            self._permutations = {epoch: np.random.default_rng([self.seed, epoch]).permutation(self.num_windows)}
        return int(self._permutations[epoch][within])

    def micro_batch(self, step: int, micro: int, *, rank: int, dp: int, mbs: int, ga: int) -> torch.Tensor:
        """``[MBS, SL+1]`` token ids for 0-based optimizer ``step`` and ``micro``-batch on DP ``rank``."""
        first = (step * ga + micro) * mbs * dp + rank * mbs
        rows = [self.window(self.window_index(first + b)) for b in range(mbs)]
        return torch.from_numpy(np.stack(rows))
