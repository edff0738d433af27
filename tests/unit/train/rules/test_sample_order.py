"""One sample order: the batches ``tran`` (and so ``deep``) trains on are Megatron's, token for token.

The reference is built here the way Megatron-LM's ``pretrain_gpt.py`` builds it from the
``mega`` launcher's arguments: megatron-core's own tokenizer (``build_tokenizer`` of the
``HuggingFaceTokenizer`` type), ``GPTDatasetConfig`` from the arguments, sizes
``[TRAIN_ITERS*GBS, 0, 0]`` (``--eval-iters 0``), ``BlendedMegatronDatasetBuilder``, and the
sampler of ``--dataloader-type single`` (each block of MBS*DP consecutive samples is one
micro-batch of every DP rank, rank ``r`` taking the ``r``-th MBS of them; GA micro-batches
make a step). Its index cache is a fresh directory, so nothing ``tran`` built is reused.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from tests.helpers.workload import tiny_environ
from train.mega.plugin import megatron_args
from train.megatron.args import megatron_settings, vocab_padding
from train.rules.samples import MegatronSamples
from train.tran.step import model_inputs
from utils.config.load import Config, load_config
from utils.config.models import get_shape
from utils.dataset.paths import dataset_prefix, tokenizer_dir


@pytest.fixture
def sample_cfg(sample_data_dir: Path, tmp_path: Path) -> Callable[..., Config]:
    def make(**overrides: str) -> Config:
        return load_config(environ=tiny_environ(sample_data_dir, tmp_path / "out", DATA_DIR=str(tmp_path / "data"),
                                                **overrides))

    import shutil

    shutil.copytree(sample_data_dir, tmp_path / "data")  # tran writes its index cache under DATA_DIR
    return make


def pretrain_gpt_args(cfg: Config, model: str, cache: Path) -> argparse.Namespace:
    """The parsed arguments pretrain_gpt.py would see for the mega launcher's argv (the data-related ones)."""
    argv = megatron_args(cfg, get_shape(model, cfg.model_size), "nvd", dataset_prefix(cfg, model),
                         tokenizer_dir(cfg, model))

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert value("--split") == "100,0,0" and value("--eval-iters") == "0" and value("--dataloader-type") == "single"
    assert "--reset-position-ids" not in argv and "--reset-attention-mask" not in argv
    assert "--eod-mask-loss" not in argv
    return argparse.Namespace(
        seed=int(value("--seed")), seq_length=int(value("--seq-length")), data_path=[value("--data-path")],
        split=value("--split"), data_cache_path=str(cache), train_iters=int(value("--train-iters")),
        global_batch_size=int(value("--global-batch-size")), micro_batch_size=int(value("--micro-batch-size")),
        eval_iters=int(value("--eval-iters")), eval_interval=int(value("--eval-interval")),
        tokenizer_type=value("--tokenizer-type"), tokenizer_model=value("--tokenizer-model"),
        vocab_file=None, merge_file=None, tokenizer_special_tokens=None, tokenizer_hf_use_fast=True,
        trust_remote_code=False, tokenizer_hf_include_special_tokens=False, tokenizer_metadata=None,
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask_in_dataloader=True, mmap_bin_files=True, num_dataset_builder_threads=1,
    )


def megatron_train_dataset(args: argparse.Namespace):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
        from megatron.core.datasets.utils import get_blend_from_list
        from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

        config = GPTDatasetConfig(
            random_seed=args.seed, sequence_length=args.seq_length, blend=get_blend_from_list(args.data_path),
            blend_per_split=None, split=args.split, num_dataset_builder_threads=args.num_dataset_builder_threads,
            path_to_cache=args.data_cache_path, mmap_bin_files=args.mmap_bin_files, tokenizer=build_tokenizer(args),
            reset_position_ids=args.reset_position_ids, reset_attention_mask=args.reset_attention_mask,
            eod_mask_loss=args.eod_mask_loss, create_attention_mask=args.create_attention_mask_in_dataloader,
        )
        eval_samples = (args.train_iters // args.eval_interval + 1) * args.eval_iters * args.global_batch_size
        sizes = [args.train_iters * args.global_batch_size, eval_samples, args.eval_iters * args.global_batch_size]
        train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
    return train


def megatron_micro_batches(dataset, rank: int, dp: int, mbs: int) -> Iterator[torch.Tensor]:
    """What --dataloader-type single feeds DP rank ``rank``: SL+1 tokens per sample (tokens, then the last label)."""
    block: list[int] = []
    for index in range(len(dataset)):
        block.append(index)
        if len(block) == mbs * dp:
            rows = []
            for sample in block[rank * mbs:(rank + 1) * mbs]:
                item = dataset[sample]
                rows.append(torch.cat([item["tokens"], item["labels"][-1:]]))
            yield torch.stack(rows)
            block = []


@pytest.mark.parametrize(("model", "sl", "iters"), [("llama", "64", "3"), ("mistral", "512", "40")])
def test_first_global_batches_are_megatrons_token_for_token(sample_cfg: Callable[..., Config], tmp_path: Path,
                                                            model: str, sl: str, iters: str) -> None:
    # DP=2, MBS=2, GA=2: GBS 8 split over two ranks and two micro-batches. The mistral case asks for
    # more samples than one epoch holds, so the shuffle over several epochs is compared too.
    cfg = sample_cfg(DP="2", GPUS_PER_NODE="2", MBS="2", GA="2", SL=sl, TRAIN_ITERS=iters, WARMUP_STEPS="1")
    args = pretrain_gpt_args(cfg, model, tmp_path / "megatron_cache")
    reference = megatron_train_dataset(args)
    _, _, _, samples = model_inputs(cfg, model)
    assert isinstance(samples, MegatronSamples)
    assert len(samples.dataset) == len(reference)
    if model == "mistral":  # a second epoch of documents is in play
        assert reference.document_index.size > len(reference.indices)
    for rank in range(cfg.dp):
        feed = megatron_micro_batches(reference, rank, cfg.dp, cfg.mbs)
        for step in range(min(cfg.train_iters, 3)):
            for micro in range(cfg.ga):
                expected = next(feed)
                got = samples.micro_batch(step, micro, rank=rank, dp=cfg.dp, mbs=cfg.mbs, ga=cfg.ga)
                assert got.shape == (cfg.mbs, cfg.sl + 1) and got.dtype == torch.int64
                assert torch.equal(got, expected), (rank, step, micro)
    # The cache tran wrote sits beside mega's, in DATA_DIR, and a second reader builds nothing new.
    cache = cfg.data_dir / "megatron_index_cache"
    files = sorted(p.name for p in cache.iterdir())
    assert files and all(name.endswith((".npy", "-description.txt")) for name in files)
    again = model_inputs(cfg, model)[3]
    assert torch.equal(again.micro_batch(0, 1, rank=1, dp=2, mbs=2, ga=2),
                       samples.micro_batch(0, 1, rank=1, dp=2, mbs=2, ga=2))
    assert sorted(p.name for p in cache.iterdir()) == files


def test_seed_changes_the_order_and_the_ranks_never_share_a_sample(sample_cfg: Callable[..., Config]) -> None:
    a = model_inputs(sample_cfg(DP="2", GPUS_PER_NODE="2"), "qwen")[3]
    b = model_inputs(sample_cfg(DP="2", GPUS_PER_NODE="2", SEED="7"), "qwen")[3]
    first = a.micro_batch(0, 0, rank=0, dp=2, mbs=2, ga=2)
    assert not torch.equal(first, b.micro_batch(0, 0, rank=0, dp=2, mbs=2, ga=2))
    rows = [tuple(row.tolist()) for step in range(3) for micro in range(2) for rank in range(2)
            for row in a.micro_batch(step, micro, rank=rank, dp=2, mbs=2, ga=2)]
    assert len(rows) == 3 * 2 * 2 * 2 and len(set(rows)) > len(rows) - 2  # distinct samples (barring repeats)


def test_missing_dataset_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"prepare the data first"):
        MegatronSamples(tmp_path / "nothing_text_document", 64, 42, 8, tmp_path / "cache", 100, 1)


def test_mega_launcher_and_tran_use_the_same_index_cache(sample_cfg: Callable[..., Config]) -> None:
    cfg = sample_cfg()
    shape = get_shape("llama", "tiny", vocab_size=2048)
    padding = vocab_padding(cfg, "llama", shape, tokenizer_dir(cfg, "llama"))
    settings = megatron_settings(cfg, shape, "nvd", tokenizer_dir(cfg, "llama"), padding)
    assert settings["dataloader_type"] == "single" and settings["eod_mask_loss"] is False
    argv = megatron_args(cfg, shape, "nvd", dataset_prefix(cfg, "llama"), tokenizer_dir(cfg, "llama"), padding)
    assert argv[argv.index("--data-cache-path") + 1] == str(model_inputs(cfg, "llama")[3].cache_dir)
