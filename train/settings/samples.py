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
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from utils.config.load import REPO_ROOT, Config
from utils.dataset.digest_cache import (
    DigestStore,
    Entry,
    entry_key,
    python_identity,
    reference_fields,
    store_folder,
    tree_digest,
)
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
from utils.io.hashing import sha256_dir

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
    """How many validation samples the digest covers: the first EVAL_SAMPLES, the fixed held-out set every evaluation
    reads on tran, deep and nemo (issue 50; 1,024 x SL 8,192 tokens at the MLPerf point)."""
    return cfg.eval_samples


def reference_valid_samples(cfg: Config, model: str, cache_dir: Path) -> list[FedSample]:
    """The validation samples as Megatron builds ``--valid-data-path`` (the virtualenv's megatron-core, tran's
    tokenizer facts: no token rewritten), every position in the loss."""
    from train.rules.samples import TokenizerFacts, _megatron_datasets
    from train.settings.sample_probe import split_arguments

    BlendedMegatronDatasetBuilder, GPTDataset, GPTDatasetConfig = _megatron_datasets()

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
                      work: Path, given: Path | None = None) -> list[FedSample]:
    """The same samples from ``framework``'s own dataset code, in its Python (``code_path`` first on the path);
    ``given`` is the tokenizer directory the framework is handed (``framework_tokenizer``'s, made here if None)."""
    if given is None:
        given, _ = framework_tokenizer(tokenizer_dir(cfg, model), cfg.output_dir)
    request = [sample_request(cfg, model, framework, given, work)]
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
        found += read_samples(written)
    return found


def sample_request(cfg: Config, model: str, framework: str, given: Path, work: Path) -> dict[str, Any]:
    """One request of ``train/settings/sample_probe.py`` (its ``.npz`` in ``work``)."""
    return {"tokenizer": TOKENIZER_KIND[framework], "tokenizer_dir": str(given),
            "prefix": str(dataset_prefix(cfg, model)), "seq_len": cfg.sl, "seed": cfg.seed,
            "num_samples": global_sample_count(cfg.gbs), "dataset_samples": cfg.train_iters * cfg.gbs,
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


def pending_samples(cfg: Config, model: str, framework: str, python: str, code_path: Path | None
                    ) -> PendingSamples | None:
    """The samples ``framework``'s probe should build alongside its settings; None where none are needed (a
    framework without its own dataset code, the data not here, or its digest already stored)."""
    if framework not in TOKENIZER_KIND or data_missing(cfg, model) or cfg.evaluates:
        return None  # with evaluation on, framework_samples builds both splits in the sample probe
    try:
        given, _ = framework_tokenizer(tokenizer_dir(cfg, model), cfg.output_dir)
        reference = _reference_fields(cfg, model)
        key = entry_key(_framework_fields(framework, entry_key(reference), given, python, code_path))
    except Exception:  # whatever fails here fails again in samples_digest, which says it as before
        return None
    if _store(cfg).get(key) is not None:
        return None
    work = Path(tempfile.mkdtemp(prefix="tprimat-samples-"))
    return PendingSamples({**sample_request(cfg, model, framework, given, work),
                           "code_path": str(code_path) if code_path else None}, work)


def done_with(pending: PendingSamples | None) -> None:
    """Remove a pending request's scratch folder (its index cache and ``.npz``)."""
    if pending is not None:
        shutil.rmtree(pending.work, ignore_errors=True)


def _store(cfg: Config) -> DigestStore:
    return DigestStore(store_folder(cfg.data_dir, cfg.output_dir))


def _reference_fields(cfg: Config, model: str) -> dict[str, Any]:
    fields = {"kind": "reference", **reference_fields(
        dataset_prefix(cfg, model), tokenizer_dir(cfg, model), cfg.sl, cfg.seed, cfg.gbs, cfg.train_iters * cfg.gbs,
        global_sample_count(cfg.gbs), REPO_ROOT)}
    if cfg.evaluates:  # the digest covers the held-out set too
        fields["valid"] = reference_fields(valid_prefix(cfg, model), tokenizer_dir(cfg, model), cfg.sl, cfg.seed,
                                           cfg.gbs, valid_dataset_samples(cfg), valid_digest_count(cfg), REPO_ROOT)
    return fields


def _framework_fields(framework: str, reference_key: str, given: Path, python: str, code_path: Path | None
                      ) -> dict[str, Any]:
    return {"kind": framework, "reference": reference_key, "tokenizer_kind": TOKENIZER_KIND[framework],
            "given_tokenizer_sha256": sha256_dir(Path(given)), "python": python_identity(python, os.environ),
            "code_path": str(code_path) if code_path else None,
            "code": tree_digest(code_path, FRAMEWORK_DATASET_CODE) if code_path else None}


def tokenizer_kind_note(framework: str) -> str:
    return f"tokenizer built as {framework} builds it: {TOKENIZER_KIND.get(framework, 'none')}"


# The folders of a Megatron tree (or megatron-core wheel) whose code builds a framework's samples and its tokenizer.
FRAMEWORK_DATASET_CODE = ("megatron/core/datasets", "megatron/core/tokenizers", "megatron/training/tokenizer")


def samples_digest(cfg: Config, model: str, framework: str, python: str | None = None,
                   code_path: Path | None = None, built: Path | None = None,
                   built_error: str | None = None) -> tuple[str | None, str]:
    """(digest or None, how it was obtained or why not); :class:`SamplesDiffer` when the framework's differ,
    :class:`SamplesUnavailable` when its own dataset or tokenizer code fails. None only where the data is not
    here (or tran cannot read it: ``data/ready.py`` stops such a launch before the preflight).

    A digest computed before on this machine for the same inputs is reused (``utils/dataset/digest_cache.py``):
    tran's once per dataset and workload, a framework's own once per dataset, workload, dataset code, tokenizer
    and Python; the answer is the one the computation gives, word for word. ``built`` / ``built_error``: the
    framework's samples as its settings probe already built them (:func:`pending_samples`), or that build's
    exception; without either its sample probe runs here.
    """
    missing = data_missing(cfg, model)
    if missing:
        return None, missing
    store = _store(cfg)
    reference = _reference_fields(cfg, model)
    reference_key = entry_key(reference)
    known = store.get(reference_key)
    if framework not in TOKENIZER_KIND or python is None:
        if known is not None:
            return known.digest, known.how
        with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
            ours, failed = _reference(cfg, model, Path(scratch))
        if ours is None:
            return None, failed
        entry = _store_reference(cfg, store, reference_key, reference, ours)
        return entry.digest, entry.how
    try:
        given, _ = framework_tokenizer(tokenizer_dir(cfg, model), cfg.output_dir)
    except Exception:  # a tokenizer tran cannot read either is said as tran's failure, as before
        if known is None:
            with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
                ours, failed = _reference(cfg, model, Path(scratch))
            if ours is None:
                return None, failed
        raise
    fields = _framework_fields(framework, reference_key, given, python, code_path)
    key = entry_key(fields)
    theirs_known = store.get(key)
    if theirs_known is not None:
        return theirs_known.digest, theirs_known.how
    with tempfile.TemporaryDirectory(prefix="tprimat-samples-") as scratch:
        ours = None
        if known is None:  # tran's samples first: data tran cannot read is said as before
            ours, failed = _reference(cfg, model, Path(scratch))
            if ours is None:
                return None, failed
            known = _store_reference(cfg, store, reference_key, reference, ours)
        if built_error is not None:
            raise SamplesUnavailable(f"{framework}'s own dataset or tokenizer code failed in {python}: "
                                     f"{framework_error(built_error)} (train/settings/sample_probe.py, "
                                     f"{tokenizer_kind_note(framework)})")
        if built is not None and built.is_file():
            theirs = read_samples(built)
        else:
            theirs = framework_samples(cfg, model, framework, python, code_path, Path(scratch), given)
        digest = digest_samples(theirs)
        if digest != known.digest:  # name the first difference (tran's samples rebuilt where they came from the store)
            ours = ours if ours is not None else _reference(cfg, model, Path(scratch))[0]
            difference = first_difference(theirs, ours) if ours is not None else "their digest differs from tran's"
            if difference is not None:
                training = global_sample_count(cfg.gbs)
                where = f" (samples from {training} on are validation samples)" if cfg.evaluates else ""
                raise SamplesDiffer(f"{framework}'s dataset feeds other samples than tran's: {difference} "
                                    f"({framework} against tran{where}); docs/SAMPLE_ORDER.md")
    valid = len(theirs) - global_sample_count(cfg.gbs)
    held_out = f" ({valid} of them validation samples)" if cfg.evaluates else ""
    entry = Entry(digest, f"{len(theirs)} samples{held_out} of {framework}'s own GPTDataset, equal to tran's")
    store.put(key, entry, fields)
    return entry.digest, entry.how


def _store_reference(cfg: Config, store: DigestStore, key: str, fields: dict[str, Any],
                     ours: list[FedSample]) -> Entry:
    """tran's samples as a stored digest entry, in the words the preflight record gives them."""
    held_out = " and its validation split" if cfg.evaluates else ""
    entry = Entry(digest_samples(ours), f"{len(ours)} samples of train/rules/samples.py{held_out}")
    store.put(key, entry, fields)
    return entry


def _reference(cfg: Config, model: str, work: Path) -> tuple[list[FedSample] | None, str]:
    """tran's samples, or (None, why not) where they cannot be built."""
    try:
        ours = reference_samples(cfg, model, work / "tran_cache")
        if cfg.evaluates:
            ours += reference_valid_samples(cfg, model, work / "tran_valid_cache")
        return ours, ""
    except Exception as exc:  # unreadable data or tokenizer: data/ready.py reports it before a real launch
        return None, f"no samples digest: tran's samples cannot be built ({type(exc).__name__}: {exc})"


def dry_run_note(cfg: Config, model: str) -> str | None:
    """The dry run's line: the digest of tran's samples (what the preflight checks every framework against),
    where the encoded data is here and readable; None otherwise (the dry run says nothing it cannot know)."""
    if data_missing(cfg, model):
        return None
    try:
        digest, _ = samples_digest(cfg, model, "tran")
    except Exception:  # data that cannot be read yet is data/ready.py's to report before a real launch
        return None
    held_out = f" and the first {cfg.eval_samples} validation samples" if cfg.evaluates else ""
    return f"{DIGEST_KEY} {digest}: the first two global batches{held_out} as tran feeds them; the preflight " \
           "checks the framework's own against it" if digest else None
