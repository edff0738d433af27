"""One sample order: the batches ``tran`` (and so ``deep``) trains on are Megatron's, token for token.

The reference is built the way Megatron-LM's ``pretrain_gpt.py`` at MEGATRON_REF builds it from the
``mega`` launcher's arguments: megatron-core's own tokenizer (``build_tokenizer`` of the
``HuggingFaceTokenizer`` type), ``GPTDatasetConfig`` from the arguments, sizes
``[TRAIN_ITERS*GBS, 0, 0]`` (``--eval-iters 0``), ``BlendedMegatronDatasetBuilder``, and the
sampler of ``--dataloader-type single`` (each block of MBS*DP consecutive samples is one
micro-batch of every DP rank, rank ``r`` taking the ``r``-th MBS of them; GA micro-batches
make a step). Its index cache is a fresh directory, so nothing ``tran`` built is reused.

It runs in a side environment (``tests/helpers/pretrain_gpt_samples.py``): the megatron-core 0.15.0
wheel (whose ``megatron/core/datasets`` and ``megatron/core/tokenizers`` are 847781764f's) under each
image's own transformers (4.57.1 amd, 4.51.3 nvd), with only the arguments 847781764f's
``megatron/training/arguments.py`` defines (issue 40: ``tokenizer_hf_use_fast`` is the 0.16 wheel's, and
transformers 5 built the slow tokenizer classes from ``tokenizer.json`` alone, which the images' do not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers.megatron_core import side_pythonpath, transformers_pin
from tests.helpers.workload import tiny_environ
from train.mega.plugin import megatron_args
from train.megatron.args import megatron_settings, vocab_padding
from train.rules.samples import MegatronSamples
from train.tran.step import model_inputs
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.paths import dataset_prefix, tokenizer_dir
from utils.spec.models import get_shape


@pytest.fixture
def sample_cfg(sample_data_dir: Path, tmp_path: Path) -> Callable[..., Config]:
    def make(**overrides: str) -> Config:
        return load_config(environ=tiny_environ(sample_data_dir, tmp_path / "out", DATA_DIR=str(tmp_path / "data"),
                                                **overrides))

    import shutil

    shutil.copytree(sample_data_dir, tmp_path / "data")  # tran writes its index cache under DATA_DIR
    return make


def pretrain_gpt_args(cfg: Config, model: str, cache: Path) -> dict:
    """The parsed arguments pretrain_gpt.py would see for the mega launcher's argv (the data-related ones), by the
    names 847781764f's megatron/training/arguments.py gives them (no argument of a later Megatron)."""
    argv = megatron_args(cfg, get_shape(model, cfg.model_size), "nvd", dataset_prefix(cfg, model),
                         tokenizer_dir(cfg, model))

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert value("--split") == "100,0,0" and value("--eval-iters") == "0" and value("--dataloader-type") == "single"
    assert "--reset-position-ids" not in argv and "--reset-attention-mask" not in argv
    assert "--eod-mask-loss" not in argv
    return dict(
        seed=int(value("--seed")), seq_length=int(value("--seq-length")), data_path=[value("--data-path")],
        split=value("--split"), data_cache_path=str(cache), train_iters=int(value("--train-iters")),
        global_batch_size=int(value("--global-batch-size")), micro_batch_size=int(value("--micro-batch-size")),
        eval_iters=int(value("--eval-iters")), eval_interval=int(value("--eval-interval")),
        tokenizer_type=value("--tokenizer-type"), tokenizer_model=value("--tokenizer-model"),
        vocab_file=None, merge_file=None, tokenizer_metadata=None,
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask_in_dataloader=True, mmap_bin_files=True, num_dataset_builder_threads=1,
    )


def megatron_samples(requests: list[tuple[dict, list[int]]], image: str, work: Path) -> list[dict[str, np.ndarray]]:
    """Samples of pretrain_gpt.py's training dataset, for each (arguments, indices), built in one process in the
    side environment of ``image`` (one start of torch, megatron-core and transformers for all of them)."""
    work.mkdir(parents=True, exist_ok=True)
    jobs = []
    for number, (args, indices) in enumerate(requests):
        gbs = args["global_batch_size"]
        eval_samples = (args["train_iters"] // args["eval_interval"] + 1) * args["eval_iters"] * gbs
        sizes = [args["train_iters"] * gbs, eval_samples, args["eval_iters"] * gbs]
        jobs.append({"args": args, "sizes": sizes, "indices": indices, "out": str(work / f"out_{number}.npz")})
    request = work / "request.json"
    request.write_text(json.dumps(jobs), encoding="utf-8")
    environ = {**os.environ, "PYTHONPATH": side_pythonpath("0.15.0", image), "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run([sys.executable, "-m", "tests.helpers.pretrain_gpt_samples", str(request)], cwd=REPO_ROOT,
                         capture_output=True, text=True, env=environ, timeout=900, check=False)
    assert run.returncode == 0, f"pretrain_gpt's dataset under the {image} image's transformers:\n{run.stderr[-3000:]}"
    return [dict(np.load(job["out"])) for job in jobs]


# (model, SL, TRAIN_ITERS) of the token-for-token test. DP=2, MBS=2, GA=2: GBS 8 split over two ranks and two
# micro-batches. The mistral case asks for more samples than one epoch holds, so the shuffle over several epochs
# is compared too.
CASES = [("llama", "64", "3"), ("mistral", "512", "40")]
LAYOUT = {"DP": "2", "GPUS_PER_NODE": "2", "MBS": "2", "GA": "2", "WARMUP_STEPS": "1"}


def wanted_samples(cfg: Config) -> list[int]:
    """Every sample index the first (at most three) steps feed, over every rank and micro-batch."""
    return sorted({index for step in range(min(cfg.train_iters, 3)) for micro in range(cfg.ga)
                   for rank in range(cfg.dp) for index in feed_order(step, micro, rank, cfg.dp, cfg.mbs, cfg.ga)})


@pytest.fixture(scope="module")
def references(sample_data_dir: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> dict[tuple[str, str, str, str], dict[str, np.ndarray]]:
    """pretrain_gpt.py's samples of every case, by (model, SL, TRAIN_ITERS, image): one process per image, over a
    copy of the sample data of its own (the tests' tran reads another copy, so nothing either builds is shared)."""
    import shutil

    root = tmp_path_factory.mktemp("pretrain-gpt")
    shutil.copytree(sample_data_dir, root / "data")
    found = {}
    for image in ("amd", "nvd"):
        requests = []
        for model, sl, iters in CASES:
            cfg = load_config(environ=tiny_environ(sample_data_dir, root / "out", DATA_DIR=str(root / "data"),
                                                   SL=sl, TRAIN_ITERS=iters, **LAYOUT))
            cache = root / f"megatron_cache_{model}_{image}"  # a fresh index cache per build
            requests.append((pretrain_gpt_args(cfg, model, cache), wanted_samples(cfg)))
        built = megatron_samples(requests, image, root / f"reference_{image}")
        found.update({(*case, image): one for case, one in zip(CASES, built, strict=True)})
    return found


def feed_order(step: int, micro: int, rank: int, dp: int, mbs: int, ga: int) -> list[int]:
    """The samples --dataloader-type single hands DP rank ``rank`` for micro-batch ``micro`` of step ``step``."""
    first = (step * ga + micro) * mbs * dp + rank * mbs
    return list(range(first, first + mbs))


@pytest.mark.parametrize("image", ["amd", "nvd"])
@pytest.mark.parametrize(("model", "sl", "iters"), CASES)
def test_first_global_batches_are_megatrons_token_for_token(
        sample_cfg: Callable[..., Config], references: dict[tuple[str, str, str, str], dict[str, np.ndarray]],
        model: str, sl: str, iters: str, image: str) -> None:
    cfg = sample_cfg(SL=sl, TRAIN_ITERS=iters, **LAYOUT)
    steps = min(cfg.train_iters, 3)
    wanted = wanted_samples(cfg)
    reference = references[model, sl, iters, image]
    assert str(reference["transformers_version"]) == transformers_pin(image)  # the image's, not the .venv's
    assert "/.side/" in str(reference["core_file"])  # the wheel's megatron-core
    window = dict(zip(wanted, reference["windows"], strict=True))
    _, _, _, samples = model_inputs(cfg, model)
    assert isinstance(samples, MegatronSamples)
    assert len(samples.dataset) == int(reference["length"])
    if model == "mistral":  # a second epoch of documents is in play
        assert int(reference["document_index_size"]) > int(reference["indices_size"])
    for rank in range(cfg.dp):
        for step in range(steps):
            for micro in range(cfg.ga):
                expected = torch.from_numpy(np.stack([window[i] for i in feed_order(step, micro, rank, cfg.dp,
                                                                                   cfg.mbs, cfg.ga)]))
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
    padding = vocab_padding(cfg, shape, tokenizer_dir(cfg, "llama"))
    settings = megatron_settings(cfg, shape, "nvd", tokenizer_dir(cfg, "llama"), padding)
    assert settings["dataloader_type"] == "single" and settings["eod_mask_loss"] is False
    argv = megatron_args(cfg, shape, "nvd", dataset_prefix(cfg, "llama"), tokenizer_dir(cfg, "llama"), padding)
    assert argv[argv.index("--data-cache-path") + 1] == str(model_inputs(cfg, "llama")[3].cache_dir)
