"""The reference samples: megatron-core's ``GPTDataset``, read in Megatron's order.

``tran`` and ``deep`` train on these samples, and the preflight's digest (``train/settings/samples.py``) checks
every other stack's against them. Building megatron-core's own dataset (as ``mega``, ``prim`` and ``nemo`` do) is
the only way to get the same token sequences in the same order; the wheels ship its compiled ``helpers_cpp``.

Configured as ``pretrain_gpt.py`` configures it for the ``mega`` launcher (docs/SAMPLE_ORDER.md): one prefix,
split ``100,0,0``, SEED, SL, no resets and no EOD loss mask, sizes ``[TRAIN_ITERS * GBS, 0, 0]`` (the number of
samples decides the epochs the shuffle covers, so it must match), the index cache in
``<DATA_DIR>/megatron_index_cache`` (shared with ``mega``/``prim``), no attention mask per sample.
The held-out validation set is built as for ``--valid-data-path V`` with ``(TRAIN_ITERS // EVAL_INTERVAL_STEPS + 1)
x EVAL_SAMPLES`` samples; evaluation ``k`` reads samples ``[(k-1)E, kE)``, ``E = EVAL_SAMPLES``.

Megatron's sampler (``dataloader_type single``) hands DP rank ``r`` samples ``(s*GA + m) * MBS*DP + r*MBS + b``
for micro-batch ``m`` of step ``s``: :meth:`MegatronSamples.micro_batch` returns those, each ``SL + 1`` tokens.
Every evaluation of ``tran`` and ``deep`` reads validation samples ``[0, EVAL_SAMPLES)`` (MLPerf's fixed held-out
set): ``micro_batch`` with ``step = i`` for eval iteration ``i``, in a set sized as Megatron and NeMo size it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from utils.dataset.megatron_modules import import_dataset_modules
from utils.dataset.sample_digest import FedSample

if TYPE_CHECKING:
    from utils.dataset.digest_cache import Window
    from utils.dataset.paths import JobData

SPLIT_ALL_TRAIN = "100,0,0"
NO_PAD = -1  # never a token id: no sample token is treated as padding (docs/SAMPLE_ORDER.md)


def _megatron_datasets() -> tuple[Any, Any, Any]:
    """(BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig): megatron-core's own classes, imported without
    the rest of megatron.core (utils/dataset/megatron_modules.py)."""
    builder, gpt = import_dataset_modules("blended_megatron_dataset_builder", "gpt_dataset")
    return builder.BlendedMegatronDatasetBuilder, gpt.GPTDataset, gpt.GPTDatasetConfig


class TokenizerFacts:
    """What ``GPTDataset`` reads from a tokenizer: vocabulary size, EOD, pad and a cache identity.

    Which tokenizer object Megatron hands the dataset depends on its version, so this stand-in gives only the facts it
    uses; none changes a sample's tokens (EOD only matters for the resets and loss mask, all off; ``pad`` is
    :data:`NO_PAD`).
    """

    def __init__(self, path: Path, vocab_size: int, eod: int) -> None:
        self.path, self.vocab_size, self.eod = str(path), vocab_size, eod
        self.pad = NO_PAD

    @property
    def unique_identifiers(self) -> OrderedDict:
        return OrderedDict(**{"class": f"{type(self).__module__}.{type(self).__qualname__}",
                              "tokenizer_path": self.path})


def gpt_dataset_config(prefix: Path, seq_len: int, seed: int, cache_dir: Path, tokenizer: Any,
                       valid: bool = False) -> Any:
    """``GPTDatasetConfig`` as ``pretrain_gpt.py`` builds it for ``--data-path prefix --split 100,0,0``, or with
    ``valid`` for ``--valid-data-path prefix`` (``blend_per_split``, no ``split``; the same switches)."""
    _, _, config_class = _megatron_datasets()
    return config_class(
        random_seed=seed,
        sequence_length=seq_len,
        blend=None if valid else ([str(prefix)], None),
        blend_per_split=[None, ([str(prefix)], None), None] if valid else None,
        split=None if valid else SPLIT_ALL_TRAIN,
        num_dataset_builder_threads=1,
        path_to_cache=str(cache_dir),
        mmap_bin_files=True,
        tokenizer=tokenizer,
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=False,
    )


def build_valid_dataset(config: Any, num_samples: int) -> Any:
    """The validation split of ``gpt_dataset_config(..., valid=True)``, ``num_samples`` long (Megatron's size)."""
    builder_class, dataset_class, _ = _megatron_datasets()
    _train, valid, _test = builder_class(dataset_class, [0, num_samples, 0], lambda: True, config).build()
    return valid


def valid_num_samples(train_iters: int, eval_interval_steps: int, eval_samples: int) -> int:
    """Megatron's validation size: an evaluation every EVAL_INTERVAL_STEPS steps plus the one after training."""
    return (train_iters // eval_interval_steps + 1) * eval_samples


def build_train_dataset(config: Any, num_samples: int) -> Any:
    """The train split, built by ``BlendedMegatronDatasetBuilder`` on every rank (rank 0 first when distributed)."""
    builder_class, dataset_class, _ = _megatron_datasets()
    train, _valid, _test = builder_class(dataset_class, [num_samples, 0, 0], lambda: True, config).build()
    return train


@dataclass
class MegatronSamples:
    """Samples of ``prefix.{bin,idx}`` in the order Megatron's ``pretrain_gpt.py`` reads them."""

    prefix: Path
    seq_len: int
    seed: int
    num_samples: int  # TRAIN_ITERS * GBS (train), valid_num_samples() (valid)
    cache_dir: Path
    vocab_size: int
    eod: int
    split: str = "train"  # or "valid": the held-out validation split (issue 34)
    dataset: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        missing = [p for p in (Path(f"{self.prefix}.bin"), Path(f"{self.prefix}.idx")) if not p.is_file()]
        if missing:
            raise FileNotFoundError(
                f"Megatron dataset missing: {', '.join(map(str, missing))}; prepare the data first "
                "(./shell/data.sh, e.g. DATASET=sample ./shell/data.sh)"
            )
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tokenizer = TokenizerFacts(self.prefix, self.vocab_size, self.eod)
        valid = self.split == "valid"
        config = gpt_dataset_config(self.prefix, self.seq_len, self.seed, self.cache_dir, tokenizer, valid=valid)
        build = build_valid_dataset if valid else build_train_dataset
        self.dataset = build(config, self.num_samples)
        if self.dataset is None or len(self.dataset) < 1:
            raise ValueError(
                f"{self.prefix}: too few tokens for one sample of SL+1={self.seq_len + 1} tokens; use a larger "
                "dataset (DATA_SAMPLES, SAMPLE_MB) or a smaller SL"
            )

    def sample(self, index: int) -> np.ndarray:
        """Global sample ``index``: its ``SL + 1`` token ids (inputs, and the next token of the last one)."""
        item = self.dataset[index]
        return np.concatenate([item["tokens"].numpy(), item["labels"].numpy()[-1:]]).astype(np.int64)

    def micro_batch(self, step: int, micro: int, *, rank: int, dp: int, mbs: int, ga: int) -> torch.Tensor:
        """``[MBS, SL+1]`` token ids for 0-based optimizer ``step`` and ``micro``-batch on DP ``rank``."""
        first = (step * ga + micro) * mbs * dp + rank * mbs
        return torch.from_numpy(np.stack([self.sample(first + b) for b in range(mbs)]))


def reference_samples(data: JobData, window: Window, facts: tuple[int, int], work: Path) -> list[FedSample]:
    """What tran and deep feed, for the preflight's digest (``train/settings/samples.py``): the first two global
    batches of :class:`MegatronSamples`, every position in the loss, ids as encoded; where the job evaluates, then
    the first EVAL_SAMPLES of the held-out set as Megatron builds ``--valid-data-path`` (the virtualenv's
    megatron-core, the tokenizer's ``facts``, vocabulary size and EOD: no token rewritten). Index caches in ``work``."""
    vocab, eod = facts
    (dataset_samples, count), ones = window.train, np.ones(window.seq_len, dtype=np.float32)
    samples = MegatronSamples(prefix=data.prefix, seq_len=window.seq_len, seed=window.seed,
                              num_samples=dataset_samples, cache_dir=work / "tran_cache", vocab_size=vocab, eod=eod)
    found = [FedSample(w[:-1], w[1:], ones)
             for w in (samples.sample(index) for index in range(min(count, len(samples.dataset))))]
    if data.valid is None or window.valid is None:
        return found
    (dataset_samples, count), cache_dir = window.valid, work / "tran_valid_cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    config = gpt_dataset_config(data.valid, window.seq_len, window.seed, cache_dir,
                                TokenizerFacts(data.valid, vocab, eod), valid=True)
    dataset = build_valid_dataset(config, dataset_samples)
    return found + [FedSample(item["tokens"].numpy(), item["labels"].numpy(), ones)
                    for item in (dataset[index] for index in range(min(count, len(dataset))))]
