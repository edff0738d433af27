"""The fed-sample digest of a job: its first two global batches, built by the framework's own dataset code.

Equal data and tokenizer fingerprints do not prove equal training data, so the preflight builds the first two
global batches with each framework's own ``GPTDataset`` and tokenizer in its Python
(:mod:`train.settings.sample_probe`), compares them with ``tran``'s (``train/rules/samples.py``) and records their
digest (``utils/dataset/sample_digest.py``). A difference stops the job naming the first differing sample; data
not on this machine gives no digest, with the reason; a probe that fails stops the job before launch
(:class:`SamplesUnavailable`), as the same code would fail on the GPUs. With evaluation on, all EVAL_SAMPLES of the
fixed held-out set are checked too (:func:`valid_dataset_samples`, :func:`reference_samples`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utils.config.model import REPO_ROOT, Config
from utils.dataset.digest_cache import DigestStore, Entry, Window, framework_key, reference_key, store_folder
from utils.dataset.framework_tokenizer import framework_tokenizer
from utils.dataset.paths import JobData, eod_id, vocab_size
from utils.dataset.sample_digest import DIGEST_KEY, FedSample, digest_samples, first_difference, global_sample_count

SAMPLE_PROBE = "train.settings.sample_probe"
# How each framework builds the tokenizer its dataset gets (train/settings/sample_probe.py).
TOKENIZER_KIND = {"mega": "megatron-core", "prim": "megatron-legacy", "nemo": "nemo"}
PROBE_TIMEOUT_S = 900


class SamplesDiffer(RuntimeError):
    """The framework's dataset feeds other samples than tran's: the first difference, in words."""


class SamplesUnavailable(RuntimeError):
    """The framework's own dataset or tokenizer code failed in its Python: its exception, in one line."""


@dataclass(frozen=True)
class SampleSource:
    """Where a framework's own first samples come from (what its plugin's ``resolve`` answers beside the record)."""

    python: str  # the Python whose own dataset code builds them
    code: Path | None = None  # the code put first on its path (a Megatron tree); None: the Python's own
    # Those samples where the settings probe built them in the same Python (pending_samples; the preflight
    # removes their folder), or that build's exception in the framework's words.
    built: Path | None = None
    error: str | None = None


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def framework_error(stderr: str) -> str:
    """The framework's exception line from a probe's stderr (the last ``XxxError: ...``), else its last lines."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    found = [line for line in lines if _EXCEPTION_LINE.match(line)]
    return found[-1] if found else " | ".join(lines[-2:]) or "no output"


def data_missing(data: JobData) -> str | None:
    missing = data.missing()
    return f"no samples digest: {', '.join(map(str, missing))} not here" if missing else None


def valid_dataset_samples(cfg: Config) -> int:
    """Megatron's validation size (``get_train_valid_test_num_samples``, ``megatron/training/training.py:2709-2726``
    at 847781764f; NeMo's ``PreTrainingDataModule.build`` the same): an evaluation every EVAL_INTERVAL_STEPS steps
    plus the one after training. It decides the epochs the validation shuffle covers."""
    return (cfg.train_iters // cfg.eval_interval_steps + 1) * cfg.eval_samples


def valid_digest_count(cfg: Config) -> int:
    """How many validation samples the digest covers: the first EVAL_SAMPLES, the fixed held-out set every evaluation
    reads on tran, deep and nemo (issue 50; 1,024 x SL 8,192 tokens at the MLPerf point)."""
    return cfg.eval_samples


def sample_window(cfg: Config, data: JobData) -> Window:
    """What decides the job's first samples besides its data: the digest store's key (with the data's files)."""
    valid = (valid_dataset_samples(cfg), valid_digest_count(cfg)) if data.valid is not None else None
    return Window(cfg.sl, cfg.seed, cfg.gbs, (cfg.train_iters * cfg.gbs, global_sample_count(cfg.gbs)), valid)


def reference_samples(data: JobData, window: Window, work: Path) -> list[FedSample]:
    """What tran and deep feed: Megatron's first two global batches, every position in the loss, ids as encoded;
    where the job evaluates, then the EVAL_SAMPLES of the held-out set as Megatron builds
    ``--valid-data-path`` (the virtualenv's megatron-core, tran's tokenizer facts: no token rewritten)."""
    # torch and megatron-core's datasets: 5.3 s to import (python -X importtime), only where tran's samples are built
    from train.rules.samples import MegatronSamples, TokenizerFacts, _megatron_datasets
    from train.settings.sample_probe import split_arguments

    tokenizer = data.tokenizer
    vocab, eod = vocab_size(tokenizer), eod_id(tokenizer)
    (dataset_samples, count), ones = window.train, np.ones(window.seq_len, dtype=np.float32)
    samples = MegatronSamples(prefix=data.prefix, seq_len=window.seq_len, seed=window.seed,
                              num_samples=dataset_samples, cache_dir=work / "tran_cache", vocab_size=vocab, eod=eod)
    found = [FedSample(w[:-1], w[1:], ones)
             for w in (samples.sample(index) for index in range(min(count, len(samples.dataset))))]
    if data.valid is None or window.valid is None:
        return found
    BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig = _megatron_datasets()
    (dataset_samples, count), cache_dir = window.valid, work / "tran_valid_cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    config = GPTDatasetConfig(
        random_seed=window.seed, sequence_length=window.seq_len, **split_arguments(str(data.valid), valid=True),
        num_dataset_builder_threads=1, path_to_cache=str(cache_dir), mmap_bin_files=True,
        tokenizer=TokenizerFacts(data.valid, vocab, eod), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False)
    dataset = BlendedMegatronDatasetBuilder(GPTDataset, [0, dataset_samples, 0], lambda: True, config).build()[1]
    return found + [FedSample(item["tokens"].numpy(), item["labels"].numpy(), ones)
                    for item in (dataset[index] for index in range(min(count, len(dataset))))]


def framework_samples(data: JobData, window: Window, framework: str, python: str, code_path: Path | None,
                      work: Path, given: Path) -> list[FedSample]:
    """The same samples from ``framework``'s own dataset code, in its Python (``code_path`` first on the path);
    ``given`` is the tokenizer directory the framework is handed (``framework_tokenizer``'s)."""
    request = [sample_request(data, window, framework, given, work)]
    if data.valid is not None and window.valid is not None:  # the validation samples, after the training ones
        request.append({**request[0], "prefix": str(data.valid), "split": "valid", "num_samples": window.valid[1],
                        "dataset_samples": window.valid[0], "out": str(work / "valid_samples.npz")})
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
        raise unavailable(framework, python, proc.stderr)
    found: list[FedSample] = []
    for one in request:
        written = Path(one["out"])
        if not written.is_file():
            raise SamplesUnavailable(f"{framework}'s dataset probe exited 0 in {python} but wrote no {written.name}")
        found += read_samples(written)
    return found


def sample_request(data: JobData, window: Window, framework: str, given: Path, work: Path) -> dict[str, Any]:
    """One request of ``train/settings/sample_probe.py`` (its ``.npz`` in ``work``)."""
    return {"tokenizer": TOKENIZER_KIND[framework], "tokenizer_dir": str(given),
            "prefix": str(data.prefix), "seq_len": window.seq_len, "seed": window.seed,
            "num_samples": window.train[1], "dataset_samples": window.train[0],
            "cache_dir": str(work / "index_cache"), "out": str(work / "samples.npz")}


def read_samples(out: Path) -> list[FedSample]:
    data = np.load(out)
    return [FedSample(t, labels, m) for t, labels, m in zip(data["tokens"], data["labels"], data["loss_mask"],
                                                             strict=True)]


@dataclass(frozen=True)
class PendingSamples:
    """A framework's own samples to build in its settings probe, so one fresh Python does both (issue 38): the
    request (``train/settings/probe_common.py`` runs it after the settings), its scratch folder (removed with
    :func:`done_with`)."""

    request: dict[str, Any]
    work: Path

    @property
    def out(self) -> Path:
        return Path(self.request["out"])


def pending_samples(cfg: Config, data: JobData, framework: str, python: str, code_path: Path | None
                    ) -> PendingSamples | None:
    """The samples ``framework``'s probe should build alongside its settings; None where none are needed (a
    framework without its own dataset code, the data not here, or its digest already stored)."""
    if framework not in TOKENIZER_KIND or data_missing(data) or cfg.evaluates:
        return None  # with evaluation on, framework_samples builds both splits in the sample probe
    window = sample_window(cfg, data)
    try:
        given, _ = framework_tokenizer(data.tokenizer_dir, cfg.output_dir)
        reference, _ = reference_key(data, window, REPO_ROOT)
        key, _ = framework_key(framework, TOKENIZER_KIND[framework], reference, given, python, code_path,
                               FRAMEWORK_DATASET_CODE)
    except Exception:  # whatever fails here fails again in samples_digest, which says it as before
        return None
    if DigestStore(store_folder(cfg.data_dir, cfg.output_dir)).get(key) is not None:
        return None
    work = Path(tempfile.mkdtemp(prefix="tprimat-samples-"))
    return PendingSamples({**sample_request(data, window, framework, given, work),
                           "code_path": str(code_path) if code_path else None}, work)


def done_with(pending: PendingSamples | None) -> None:
    """Remove a pending request's scratch folder (its index cache and ``.npz``)."""
    if pending is not None:
        shutil.rmtree(pending.work, ignore_errors=True)


def unavailable(framework: str, python: str, stderr: str) -> SamplesUnavailable:
    """The framework's own dataset or tokenizer code failed in its Python: its exception line, in one line."""
    return SamplesUnavailable(f"{framework}'s own dataset or tokenizer code failed in {python}: "
                              f"{framework_error(stderr)} (train/settings/sample_probe.py, tokenizer built as "
                              f"{framework} builds it: {TOKENIZER_KIND.get(framework, 'none')})")


# The folders of a Megatron tree (or megatron-core wheel) whose code builds a framework's samples and its tokenizer.
FRAMEWORK_DATASET_CODE = ("megatron/core/datasets", "megatron/core/tokenizers", "megatron/training/tokenizer")


def samples_digest(cfg: Config, data: JobData, framework: str, source: SampleSource | None = None
                   ) -> tuple[str | None, str]:
    """(digest or None, how it was obtained or why not); :class:`SamplesDiffer` when the framework's differ,
    :class:`SamplesUnavailable` when its own dataset or tokenizer code fails. None only where the data is not here.

    A digest computed before on this machine for the same inputs is reused (``utils/dataset/digest_cache.py``), with
    the same answer word for word. ``source``: where the framework's own samples come from (None: tran's are the
    job's), already built by its settings probe (:func:`pending_samples`) or built here by its sample probe.
    """
    missing = data_missing(data)
    if missing:
        return None, missing
    window = sample_window(cfg, data)
    store = DigestStore(store_folder(cfg.data_dir, cfg.output_dir))
    reference, reference_fields = reference_key(data, window, REPO_ROOT)
    known = store.get(reference)
    if framework not in TOKENIZER_KIND or source is None:
        if known is not None:
            return known.digest, known.how
        with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
            ours, failed = _reference(data, window, Path(scratch))
        if ours is None:
            return None, failed
        entry = _store_reference(store, reference, reference_fields, ours, data)
        return entry.digest, entry.how
    python, code_path = source.python, source.code
    try:
        given, _ = framework_tokenizer(data.tokenizer_dir, cfg.output_dir)
    except Exception:  # a tokenizer tran cannot read either is said as tran's failure, as before
        if known is None:
            with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
                ours, failed = _reference(data, window, Path(scratch))
            if ours is None:
                return None, failed
        raise
    key, fields = framework_key(framework, TOKENIZER_KIND[framework], reference, given, python, code_path,
                                FRAMEWORK_DATASET_CODE)
    theirs_known = store.get(key)
    if theirs_known is not None:
        return theirs_known.digest, theirs_known.how
    with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
        ours = None
        if known is None:  # tran's samples first: data tran cannot read is said as before
            ours, failed = _reference(data, window, Path(scratch))
            if ours is None:
                return None, failed
            known = _store_reference(store, reference, reference_fields, ours, data)
        if source.error is not None:
            raise unavailable(framework, python, source.error)
        if source.built is not None and source.built.is_file():
            theirs = read_samples(source.built)
        else:
            theirs = framework_samples(data, window, framework, python, code_path, Path(scratch), given)
        digest = digest_samples(theirs)
        if digest != known.digest:  # name the first difference (tran's samples rebuilt where they came from the store)
            ours = ours if ours is not None else _reference(data, window, Path(scratch))[0]
            difference = first_difference(theirs, ours) if ours is not None else "their digest differs from tran's"
            if difference is not None:
                where = f" (samples from {window.train[1]} on are validation samples)" if cfg.evaluates else ""
                raise SamplesDiffer(f"{framework}'s dataset feeds other samples than tran's: {difference} "
                                    f"({framework} against tran{where}); docs/SAMPLE_ORDER.md")
    valid = len(theirs) - window.train[1]
    held_out = f" ({valid} of them validation samples)" if cfg.evaluates else ""
    entry = Entry(digest, f"{len(theirs)} samples{held_out} of {framework}'s own GPTDataset, equal to tran's")
    store.put(key, entry, fields)
    return entry.digest, entry.how


def _store_reference(store: DigestStore, key: str, fields: dict[str, Any], ours: list[FedSample],
                     data: JobData) -> Entry:
    """tran's samples as a stored digest entry, in the words the preflight record gives them."""
    held_out = " and its validation split" if data.valid is not None else ""
    entry = Entry(digest_samples(ours), f"{len(ours)} samples of train/rules/samples.py{held_out}")
    store.put(key, entry, fields)
    return entry


def _reference(data: JobData, window: Window, work: Path) -> tuple[list[FedSample] | None, str]:
    """tran's samples, or (None, why not) where they cannot be built."""
    try:
        return reference_samples(data, window, work), ""
    except Exception as exc:  # unreadable data or tokenizer: data/ready.py reports it before a real launch
        return None, f"no samples digest: tran's samples cannot be built ({type(exc).__name__}: {exc})"


def dry_run_note(cfg: Config, data: JobData) -> str | None:
    """The dry run's line: the digest of tran's samples (what the preflight checks every framework against),
    where the encoded data is here and readable; None otherwise (the dry run says nothing it cannot know)."""
    if data_missing(data):
        return None
    try:
        digest, _ = samples_digest(cfg, data, "tran")
    except Exception:  # data that cannot be read yet is data/ready.py's to report before a real launch
        return None
    held_out = f" and the first {cfg.eval_samples} validation samples" if cfg.evaluates else ""
    return f"{DIGEST_KEY} {digest}: the first two global batches{held_out} as tran feeds them; the preflight " \
           "checks the framework's own against it" if digest else None
