"""The fed-sample digest of a job: its first two global batches, built by the framework's own dataset code.

Why: equal data and tokenizer fingerprints did not prove equal training data (issue 21: Qwen's
EOD tokens were rewritten and masked on three stacks). The preflight builds the first two global
batches with each framework's own ``GPTDataset`` and tokenizer class, in the framework's Python
(:mod:`train.settings.sample_probe`), compares them with ``tran``'s (``train/rules/samples.py``, the
reference every framework must equal) and records their digest (``utils/dataset/sample_digest.py``) in
``effective_settings``. A difference stops the job before training, naming the first differing
sample and position. Where the encoded data is not on this machine, there is no digest and the
record says why. Where the framework's own dataset or tokenizer code fails (an exception in its
probe, a time-out), the job stops before launch naming that exception (:class:`SamplesUnavailable`):
the same code would fail in training, after model and optimizer setup, on the GPUs (issue 40).
Data ``tran`` itself cannot read is ``data/ready.py``'s to report, which a launch checks before
the preflight; a probe-less framework (``tran``, ``deep``) gets tran's digest.

With held-out evaluation on (issue 34) the digest covers the validation samples too: the first samples of the
first evaluation (at most two global batches), built by the framework's own ``GPTDataset`` as it builds
``--valid-data-path`` (:func:`train.settings.sample_probe.split_arguments`) with Megatron's validation size
(:func:`valid_dataset_samples`), after the training samples, checked against the same split built by the
virtualenv's megatron-core (:func:`reference_valid_samples`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from utils.config.load import REPO_ROOT, Config
from utils.dataset.framework_tokenizer import framework_tokenizer
from utils.dataset.paths import (
    dataset_prefix,
    eod_id,
    load_tokenizer,
    missing_files,
    tokenizer_dir,
    valid_prefix,
    vocab_size,
)
from utils.dataset.sample_digest import DIGEST_KEY, FedSample, digest_samples, first_difference, global_sample_count

SAMPLE_PROBE = "train.settings.sample_probe"
# How each framework builds the tokenizer its dataset gets (train/settings/sample_probe.py).
TOKENIZER_KIND = {"mega": "megatron-core", "prim": "megatron-legacy", "nemo": "nemo"}
PROBE_TIMEOUT_S = 900


class SamplesDiffer(RuntimeError):
    """The framework's dataset feeds other samples than tran's: the first difference, in words."""


class SamplesUnavailable(RuntimeError):
    """The framework's own dataset or tokenizer code failed in its Python: its exception, in one line."""


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def framework_error(stderr: str) -> str:
    """The framework's exception line from a probe's stderr (the last ``XxxError: ...``), else its last lines."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return found[-1] if found else " | ".join(lines[-2:]) or "no output"


def data_missing(cfg: Config, model: str) -> str | None:
    missing = missing_files(dataset_prefix(cfg, model), tokenizer_dir(cfg, model))
    if cfg.evaluates:
        missing += missing_files(valid_prefix(cfg, model))
    return f"no samples digest: {', '.join(map(str, missing))} not here" if missing else None


def valid_dataset_samples(cfg: Config) -> int:
    """Megatron's validation size (``get_train_valid_test_num_samples``, ``megatron/training/training.py:2709-2726``
    at 847781764f; NeMo's ``PreTrainingDataModule.build`` the same): an evaluation every EVAL_INTERVAL_STEPS steps
    plus the one after training. It decides the epochs the validation shuffle covers."""
    return (cfg.train_iters // cfg.eval_interval_steps + 1) * cfg.eval_samples


def valid_digest_count(cfg: Config) -> int:
    """How many validation samples the digest covers: the first evaluation's first (at most two global batches)."""
    return min(cfg.eval_samples, global_sample_count(cfg.gbs))


def reference_valid_samples(cfg: Config, model: str, cache_dir: Path) -> list[FedSample]:
    """The validation samples as Megatron builds ``--valid-data-path`` (the virtualenv's megatron-core, tran's
    tokenizer facts: no token rewritten), every position in the loss."""
    import warnings

    from train.rules.samples import TokenizerFacts
    from train.settings.sample_probe import split_arguments

    with warnings.catch_warnings():  # megatron.core's package import warns about optional TE/Apex
        warnings.filterwarnings("ignore", message="Transformer Engine and Apex are not installed")
        from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
        from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    tokenizer = load_tokenizer(tokenizer_dir(cfg, model))
    prefix = valid_prefix(cfg, model)
    cache_dir.mkdir(parents=True, exist_ok=True)
    config = GPTDatasetConfig(
        random_seed=cfg.seed, sequence_length=cfg.sl, **split_arguments(str(prefix), valid=True),
        num_dataset_builder_threads=1, path_to_cache=str(cache_dir), mmap_bin_files=True,
        tokenizer=TokenizerFacts(prefix, vocab_size(tokenizer), eod_id(tokenizer)), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False)
    dataset = BlendedMegatronDatasetBuilder(GPTDataset, [0, valid_dataset_samples(cfg), 0], lambda: True,
                                           config).build()[1]
    items = [dataset[index] for index in range(min(valid_digest_count(cfg), len(dataset)))]
    return [FedSample(item["tokens"].numpy(), item["labels"].numpy(), np.ones(cfg.sl, dtype=np.float32))
            for item in items]


def reference_samples(cfg: Config, model: str, cache_dir: Path) -> list[FedSample]:
    """What tran and deep feed: Megatron's first two global batches, every position in the loss, ids as encoded."""
    from train.rules.samples import MegatronSamples

    tokenizer = load_tokenizer(tokenizer_dir(cfg, model))
    samples = MegatronSamples(prefix=dataset_prefix(cfg, model), seq_len=cfg.sl, seed=cfg.seed,
                              num_samples=cfg.train_iters * cfg.gbs, cache_dir=cache_dir,
                              vocab_size=vocab_size(tokenizer), eod=eod_id(tokenizer))
    windows = [samples.sample(index) for index in range(min(global_sample_count(cfg.gbs), len(samples.dataset)))]
    return [FedSample(w[:-1], w[1:], np.ones(cfg.sl, dtype=np.float32)) for w in windows]


def framework_samples(cfg: Config, model: str, framework: str, python: str, code_path: Path | None,
                      work: Path) -> list[FedSample]:
    """The same samples from ``framework``'s own dataset code, in its Python (``code_path`` first on the path)."""
    given, _ = framework_tokenizer(tokenizer_dir(cfg, model), cfg.output_dir)
    out = work / "samples.npz"
    request = [{"tokenizer": TOKENIZER_KIND[framework], "tokenizer_dir": str(given),
                "prefix": str(dataset_prefix(cfg, model)), "seq_len": cfg.sl, "seed": cfg.seed,
                "num_samples": global_sample_count(cfg.gbs), "dataset_samples": cfg.train_iters * cfg.gbs,
                "cache_dir": str(work / "index_cache"), "out": str(out)}]
    if cfg.evaluates:  # the validation samples in the same process, after the training ones
        request.append({**request[0], "prefix": str(valid_prefix(cfg, model)), "split": "valid",
                        "num_samples": valid_digest_count(cfg), "dataset_samples": valid_dataset_samples(cfg),
                        "out": str(work / "valid_samples.npz")})
    (work / "request.json").write_text(json.dumps(request), encoding="utf-8")
    path = [str(code_path)] if code_path else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        proc = subprocess.run([python, "-m", SAMPLE_PROBE, str(work / "request.json")], capture_output=True,
                              text=True, cwd=REPO_ROOT, env=env, timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SamplesUnavailable(f"{framework}'s own dataset code did not build its first samples in "
                                 f"{PROBE_TIMEOUT_S} s in {python}") from None
    except OSError as exc:
        raise SamplesUnavailable(f"{framework}'s Python {python} cannot be started: {exc}") from None
    if proc.returncode != 0:
        raise SamplesUnavailable(f"{framework}'s own dataset or tokenizer code failed in {python}: "
                                 f"{framework_error(proc.stderr)} (train/settings/sample_probe.py, "
                                 f"{tokenizer_kind_note(framework)})")
    found: list[FedSample] = []
    for one in request:
        written = Path(one["out"])
        if not written.is_file():
            raise SamplesUnavailable(f"{framework}'s dataset probe exited 0 in {python} but wrote no {written.name}")
        data = np.load(written)
        found += [FedSample(t, labels, m) for t, labels, m in zip(data["tokens"], data["labels"], data["loss_mask"],
                                                                   strict=True)]
    return found


def tokenizer_kind_note(framework: str) -> str:
    return f"tokenizer built as {framework} builds it: {TOKENIZER_KIND.get(framework, 'none')}"


def samples_digest(cfg: Config, model: str, framework: str, python: str | None = None,
                   code_path: Path | None = None) -> tuple[str | None, str]:
    """(digest or None, how it was obtained or why not); :class:`SamplesDiffer` when the framework's differ,
    :class:`SamplesUnavailable` when its own dataset or tokenizer code fails. None only where the data is not
    here (or tran cannot read it: ``data/ready.py`` stops such a launch before the preflight)."""
    missing = data_missing(cfg, model)
    if missing:
        return None, missing
    with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
        try:
            ours = reference_samples(cfg, model, Path(scratch) / "tran_cache")
            if cfg.evaluates:
                ours += reference_valid_samples(cfg, model, Path(scratch) / "tran_valid_cache")
        except Exception as exc:  # unreadable data or tokenizer: data/ready.py reports it before a real launch
            return None, f"no samples digest: tran's samples cannot be built ({type(exc).__name__}: {exc})"
        if framework not in TOKENIZER_KIND or python is None:
            held_out = " and its validation split" if cfg.evaluates else ""
            return digest_samples(ours), f"{len(ours)} samples of train/rules/samples.py{held_out}"
        theirs = framework_samples(cfg, model, framework, python, code_path, Path(scratch))
    difference = first_difference(theirs, ours)
    training = global_sample_count(cfg.gbs)
    if difference is not None:
        where = f" (samples from {training} on are validation samples)" if cfg.evaluates else ""
        raise SamplesDiffer(f"{framework}'s dataset feeds other samples than tran's: {difference} "
                            f"({framework} against tran{where}); docs/SAMPLE_ORDER.md")
    held_out = f" ({len(theirs) - training} of them validation samples)" if cfg.evaluates else ""
    return digest_samples(theirs), (f"{len(theirs)} samples{held_out} of {framework}'s own GPTDataset, "
                                    "equal to tran's")


def dry_run_note(cfg: Config, model: str) -> str | None:
    """The dry run's line: the digest of tran's samples (what the preflight checks every framework against),
    where the encoded data is here and readable; None otherwise (the dry run says nothing it cannot know)."""
    if data_missing(cfg, model):
        return None
    try:
        digest, _ = samples_digest(cfg, model, "tran")
    except Exception:  # data that cannot be read yet is data/ready.py's to report before a real launch
        return None
    held_out = " and the first validation samples" if cfg.evaluates else ""
    return f"{DIGEST_KEY} {digest}: the first two global batches{held_out} as tran feeds them; the preflight " \
           "checks the framework's own against it" if digest else None
