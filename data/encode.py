"""Stage 3: tokenize ``clean.jsonl`` into a Megatron indexed dataset per model.

Output: ``<DATA_DIR>/<dataset>-<model>_text_document.{bin,idx}`` (``utils.dataset.dataset_prefix``),
written by megatron-core's ``IndexedDatasetBuilder`` exactly as Megatron-LM's
``tools/preprocess_data.py --append-eod`` would: one document per input line, the
tokenizer's own special-token policy (``tokenizer(text)``, so Llama gets its BOS),
the eos id appended as EOD, dtype by megatron-core's rule (uint16 below 65500
tokens of vocabulary, else int32).

Why it is faster than ``preprocess_data.py``: that tool sends one document at a time
to a process pool, paying a Python tokenizer call and a pickled list per document.
Here documents are encoded in batches and written a batch at a time, by one of three
paths (the log and the manifest say which one ran, and why):

* ``tiktoken`` (the fast path, ``data/fast_bpe.py``): for byte-level BPE tokenizers whose
  pre-tokenizer is one regex split (Llama 3's and the sample tokenizers, tested; Qwen 2.5's
  tokenizer.json has the same shape, untested here for want of an offline copy), a
  ``tiktoken`` encoding built from the tokenizer's own files, one call per batch on
  ``ENCODE_WORKERS`` threads. Used only after ``data/encode_check.py`` found it equal to
  ``tokenizer(text)`` on the dataset's first documents, a seeded random run of them and
  adversarial texts; any difference, or files it cannot express, keep the next path.
* ``tokenizers``: the tokenizer's Rust ``encode_batch_fast``, which spreads a batch over
  ``ENCODE_WORKERS`` threads (checked against ``tokenizer(text)`` on the first documents).
* ``transformers``: ``tokenizer(texts)`` itself, for a tokenizer without a Rust backend.

The main thread writes the finished batches in order while the next ones are encoded.
Memory is bounded by a few batches in flight plus the builder's per-document index (as
in Megatron).

An interrupted run never leaves a pair ``data/verify.py`` accepts: the old outputs
are removed before a redo, new ones are built under temporary names and renamed
only when complete, and the manifest is written last.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from data import manifest as mf
from data.common import (
    DataError,
    add_model_arg,
    base_parser,
    config_from_args,
    iter_jsonl_texts,
    run_stage,
    sha256_dir,
    sha256_file,
    tool_versions,
)
from data.encode_check import adversarial_texts, dataset_sample, first_difference
from data.fast_bpe import FastBpe, NotExpressible, Wrapping
from utils.atomic import temp_sibling
from utils.configure import Config
from utils.dataset import clean_path, dataset_prefix, eod_id, load_tokenizer, tokenizer_dir, vocab_size

BATCH_DOCUMENTS = 1024
BATCH_CHARACTERS = 1 << 20  # a batch also ends at this much text, so book-length documents stay bounded
HEAD_CHARACTERS = 8 << 20  # encoded by the fast path while the tokenizer loads (~1 s of tiktoken on one core)
_SELF_CHECK_DOCUMENTS = 8

# Which implementation produced the ids (recorded in the manifest and printed).
PATH_TIKTOKEN = "tiktoken"
PATH_TOKENIZERS = "tokenizers"
PATH_TRANSFORMERS = "transformers"


@dataclass
class EncodeStats:
    documents: int
    tokens: int
    seconds: float
    tokens_per_second: float
    dtype: str
    vocab_size: int
    eod_id: int
    workers: int
    tokenizer_path: str = PATH_TOKENIZERS  # which implementation produced the ids
    tokenizer_path_note: str = ""  # why that one (the fast path's check, or why it was not used)
    tokenizer_path_seconds: float = 0.0  # building and checking the fast path, included in ``seconds``


def resolve_workers(requested: int) -> int:
    """``ENCODE_WORKERS=0`` means one per CPU this process may use."""
    if requested > 0:
        return requested
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def bin_idx(prefix: Path) -> tuple[Path, Path]:
    return Path(f"{prefix}.bin"), Path(f"{prefix}.idx")


def encode_manifest_path(prefix: Path) -> Path:
    return Path(f"{prefix}.manifest.json")


def _batches(texts: Iterable[str], size: int, characters: int = BATCH_CHARACTERS) -> Iterator[list[str]]:
    batch: list[str] = []
    held = 0
    for text in texts:
        batch.append(text)
        held += len(text)
        if len(batch) >= size or held >= characters:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


Documents = tuple[np.ndarray, np.ndarray]  # the tokens of a batch (eod included) and each document's length


def _documents_from_lists(lists: list[list[int]], eod: int, dtype: type) -> Documents:
    """Per-document id lists -> one array, ``eod`` after every non-empty document (Megatron's ``--append-eod``)."""
    for ids in lists:
        if ids:
            ids.append(eod)
    sizes = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    tokens = np.fromiter(itertools.chain.from_iterable(lists), dtype=dtype, count=int(sizes.sum()))
    return tokens, sizes


class _TokenizerEncoder:
    """Batches through the tokenizer itself: ``tokenizers``' ``encode_batch_fast``, or ``tokenizer(texts)``.

    Either gives ``tokenizer(text)["input_ids"]`` per document; the Rust call is checked
    against the ``transformers`` call on the first documents and dropped if they differ.
    """

    def __init__(self, tokenizer: Any, eod: int, dtype: type) -> None:
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.eod, self.dtype = eod, dtype
        self.checked = False

    @property
    def path(self) -> str:
        return PATH_TOKENIZERS if self.backend is not None else PATH_TRANSFORMERS

    def ids(self, texts: list[str]) -> list[list[int]]:
        if self.backend is None:
            return list(self.tokenizer(texts, return_attention_mask=False)["input_ids"])
        ids = [encoding.ids for encoding in self.backend.encode_batch_fast(texts, add_special_tokens=True)]
        if not self.checked:
            # The Rust fast path must agree with the transformers call Megatron's tool makes;
            # if a tokenizer adds Python-side behaviour, fall back to that call instead.
            self.checked = True
            sample = texts[:_SELF_CHECK_DOCUMENTS]
            if [self.tokenizer(text)["input_ids"] for text in sample] != ids[: len(sample)]:
                print("encode: note: encode_batch_fast disagrees with tokenizer(text); using tokenizer(texts)")
                self.backend = None
                return self.ids(texts)
        return ids

    def __call__(self, texts: list[str]) -> Documents:
        return _documents_from_lists(self.ids(texts), self.eod, self.dtype)


class _FastEncoder:
    """Batches through ``data/fast_bpe.py``; a batch it cannot take exactly goes to the tokenizer."""

    path = PATH_TIKTOKEN

    def __init__(self, fast: FastBpe, wrapping: Wrapping, fallback: _TokenizerEncoder) -> None:
        self.fast, self.wrapping, self.fallback = fast, wrapping, fallback

    def __call__(self, texts: list[str]) -> Documents:
        return self.finish(self.fast.encode_batch(texts), texts)

    def finish(self, result: tuple[np.ndarray, np.ndarray] | None, texts: list[str]) -> Documents:
        """A batch's ``encode_batch`` result as documents to write (the tokenizer's, if there is none)."""
        if result is None:
            return self.fallback(texts)
        return self.wrapping.documents(*result, eod=self.fallback.eod, dtype=self.fallback.dtype)


@dataclass
class HeadStart:
    """The fast path begun from ``tokenizer.json`` alone, on the first documents, while the tokenizer loads.

    Loading a tokenizer holds the GIL for about a second (Llama 3); ``tiktoken`` does not,
    so the other core encodes meanwhile. Nothing it produces is written before the loaded
    tokenizer has been compared with the file and the exactness check has passed.
    """

    candidate: FastBpe | None
    reason: str  # why there is no candidate
    texts: list[str]
    result: Future | None
    pool: ThreadPoolExecutor | None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def start_head(tokenizer_json: Path, texts: Iterator[str], characters: int | None = None) -> HeadStart:
    """Build the fast path from the file and start encoding ``characters`` (default ``HEAD_CHARACTERS``) of texts."""
    try:
        candidate = FastBpe.from_file(tokenizer_json)
    except NotExpressible as exc:
        return HeadStart(None, str(exc), [], None, None)
    head = next(_batches(texts, size=1 << 62, characters=characters or HEAD_CHARACTERS), [])
    pool = ThreadPoolExecutor(max_workers=1)
    return HeadStart(candidate, "", head, pool.submit(candidate.encode_batch, head), pool)


def choose_encoder(tokenizer: Any, tokenizer_json: Path | None, check_texts: Sequence[str], eod: int,
                   dtype: type, fast_path: bool = True,
                   head: HeadStart | None = None) -> tuple[_FastEncoder | _TokenizerEncoder, str]:
    """The fast path when it can be built and gives ``tokenizer(text)``'s ids on every check text.

    Returns the encoder and one line on the choice (the reason, when the fast path is not taken).
    ``head`` brings a fast path already built from the file; it is compared with ``tokenizer``.
    """
    fallback = _TokenizerEncoder(tokenizer, eod, dtype)
    if fallback.backend is None:
        return fallback, "the tokenizer has no tokenizers backend; fast path not tried"
    if not fast_path:
        return fallback, "fast path turned off (--tokenizer-path tokenizers)"
    if tokenizer_json is None:
        tokenizer_json = Path(getattr(tokenizer, "name_or_path", "") or ".") / "tokenizer.json"
    started = time.perf_counter()
    if head is not None and head.candidate is None:
        return fallback, f"fast path not used: {head.reason}"
    try:
        if head is not None and head.candidate is not None:
            fast = head.candidate
            fast.check_loaded(tokenizer)
        else:
            fast = FastBpe.from_tokenizer(tokenizer, tokenizer_json)
        wrapping = Wrapping.of(tokenizer)
    except NotExpressible as exc:
        return fallback, f"fast path not used: {exc}"
    adversarial = adversarial_texts(list(fast.specials))
    difference = first_difference(tokenizer, fast, wrapping, check_texts, adversarial)
    if difference is not None:
        return fallback, f"fast path not used: it differs from tokenizer(text) on {difference}"
    return _FastEncoder(fast, wrapping, fallback), (
        f"fast path: {len(check_texts)} dataset and {len(adversarial)} adversarial texts identical to "
        f"tokenizer(text), checked in {time.perf_counter() - started:.1f}s")


def _write(builder: Any, tokens: np.ndarray, sizes: np.ndarray) -> None:
    """Many one-sequence documents at once: what ``add_document(ids, [len(ids)])`` per document writes.

    An empty document (no ids, so no eod either) adds no sequence but still ends a document,
    as ``add_document([], [])`` does in Megatron-LM's ``tools/preprocess_data.py``.
    """
    builder.data_file.write(np.ascontiguousarray(tokens).data)  # the bytes ``tobytes(order="C")`` gives, uncopied
    first = len(builder.sequence_lengths)
    builder.sequence_lengths.extend(sizes[sizes > 0].tolist())
    builder.document_indices.extend((first + np.cumsum(sizes > 0)).tolist())


def encode_documents(texts: Iterable[str], tokenizer: Any, prefix: Path, workers: int,
                     batch_documents: int | None = None, total: int | None = None,
                     progress: bool = True, check_texts: Sequence[str] | None = None,
                     tokenizer_json: Path | None = None, fast_path: bool = True,
                     head: HeadStart | None = None) -> EncodeStats:
    """Tokenize ``texts`` and write ``prefix.bin/.idx`` atomically (temp names, then rename).

    ``check_texts`` are the dataset documents the fast path must reproduce before it is used
    (default: the first batch); ``tokenizer_json`` the file it is built from (default: the
    ``tokenizer.json`` in the tokenizer's directory); ``fast_path=False`` keeps to the tokenizer;
    ``head`` is :func:`start_head`'s early start on the documents before ``texts``.
    """
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    vocab = vocab_size(tokenizer)
    eod = eod_id(tokenizer)
    dtype = DType.optimal_dtype(vocab)
    bin_path, idx_path = bin_idx(prefix)
    tmp_bin = temp_sibling(prefix, ".bin")
    tmp_idx = tmp_bin.with_suffix(".idx")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    documents = tokens = 0
    started = time.perf_counter()
    size = batch_documents or BATCH_DOCUMENTS
    batches = _batches(texts, size)
    lead = head.texts if head is not None else []
    first = lead[:size] if lead else next(batches, [])
    choosing = time.perf_counter()
    encoder, note = choose_encoder(tokenizer, tokenizer_json, first if check_texts is None else check_texts, eod, dtype,
                                   fast_path, head)
    choice_seconds = time.perf_counter() - choosing
    print(f"encode: {prefix.name}: tokenizer path {encoder.path} ({note})")
    # tiktoken releases the GIL for a whole batch, so batches go to ``workers`` threads; the
    # tokenizers library parallelises inside one batch, so one batch is encoded at a time.
    threads = workers if encoder.path == PATH_TIKTOKEN else 1
    try:
        builder = IndexedDatasetBuilder(str(tmp_bin), dtype=dtype)
        with tqdm(total=total, desc=f"encode {prefix.name}", unit="doc", disable=not progress) as bar, \
                ThreadPoolExecutor(max_workers=threads) as pool:
            pending: collections.deque[Callable[[], Documents]] = collections.deque()
            if lead and isinstance(encoder, _FastEncoder) and head is not None and head.result is not None:
                early = head.result
                pending.append(lambda: encoder.finish(early.result(), lead))
                starts: Iterable[list[str]] = []
            else:  # the head's documents (if any) are encoded again, by the path chosen
                starts = _batches(lead, size) if lead else [first] if first else []
            for batch in itertools.chain(starts, batches, [None]):
                if batch is not None:
                    pending.append(pool.submit(encoder, batch).result)
                while pending and (batch is None or len(pending) > threads):
                    batch_tokens, sizes = pending.popleft()()
                    _write(builder, batch_tokens, sizes)
                    tokens += len(batch_tokens)
                    documents += len(sizes)
                    elapsed = time.perf_counter() - started
                    bar.update(documents - bar.n)
                    bar.set_postfix(tokens=tokens, tok_per_s=f"{tokens / max(elapsed, 1e-9):,.0f}")
        if documents == 0:
            raise DataError(f"{prefix}: no documents to encode")
        builder.finalize(str(tmp_idx))
        idx_path.unlink(missing_ok=True)  # never pair a new .bin with an old .idx
        os.replace(tmp_bin, bin_path)
        os.replace(tmp_idx, idx_path)
    finally:
        if head is not None:
            head.close()
        for tmp in (tmp_bin, tmp_idx):
            tmp.unlink(missing_ok=True)
    seconds = time.perf_counter() - started
    return EncodeStats(documents=documents, tokens=tokens, seconds=round(seconds, 3),
                       tokens_per_second=round(tokens / max(seconds, 1e-9), 1), dtype=dtype.__name__,
                       vocab_size=vocab, eod_id=eod, workers=workers, tokenizer_path=encoder.path,
                       tokenizer_path_note=note, tokenizer_path_seconds=round(choice_seconds, 3))


def _remove_outputs(prefix: Path) -> None:
    """Before a redo: the manifests first, then the pair, so no stale pair is ever vouched for."""
    Path(f"{prefix}.verify.json").unlink(missing_ok=True)
    encode_manifest_path(prefix).unlink(missing_ok=True)
    for path in reversed(bin_idx(prefix)):
        path.unlink(missing_ok=True)
    for stale in prefix.parent.glob(f".{prefix.name}.tmp-*"):
        with contextlib.suppress(OSError):
            stale.unlink()


def encode_file(source: Path, tok_dir: Path, prefix: Path, workers: int, total: int | None = None,
                progress: bool = True, fast_path: bool = True, seed: int = 0) -> EncodeStats:
    """Encode a JSONL file with the tokenizer in ``tok_dir``: the fast path starts while the tokenizer loads."""
    texts = iter_jsonl_texts(source)
    head = start_head(tok_dir / "tokenizer.json", texts) if fast_path else None
    try:
        tokenizer = load_tokenizer(tok_dir)
    except BaseException:
        if head is not None:
            head.close()
        raise
    return encode_documents(texts, tokenizer, prefix, workers, total=total, progress=progress,
                            check_texts=dataset_sample(source, seed=seed), tokenizer_json=tok_dir / "tokenizer.json",
                            fast_path=fast_path, head=head)


def encode_model(cfg: Config, model: str, force: bool = False, progress: bool = True,
                 fast_path: bool = True) -> EncodeStats | None:
    """Encode the clean corpus for one model; ``None`` when the manifest says it is current."""
    source = clean_path(cfg)
    if not source.is_file():
        raise DataError(f"{source}: input not found; run `python -m data.clean` first")
    tok_dir = tokenizer_dir(cfg, model)
    prefix = dataset_prefix(cfg, model)
    key = {
        "model": model,
        "clean_sha256": sha256_file(source),
        "tokenizer_sha256": sha256_dir(tok_dir),
        "special_tokens": "tokenizer default + eos appended",
        "versions": tool_versions("tokenizers", "transformers", "tiktoken", "megatron-core", "numpy"),
    }
    manifest_path = encode_manifest_path(prefix)
    if not force and mf.is_current(manifest_path, key):
        print(f"encode: {prefix}.bin/.idx are current (manifest {manifest_path.name}); --force to redo")
        return None
    _remove_outputs(prefix)
    clean_manifest = mf.read_manifest(source.parent / "clean.manifest.json") or {}
    total = clean_manifest.get("counts", {}).get("kept")
    workers = resolve_workers(cfg.encode_workers)
    os.environ.setdefault("RAYON_NUM_THREADS", str(workers))  # tokenizers' thread pool, read once per process
    stats = encode_file(source, tok_dir, prefix, workers, total=total, progress=progress, fast_path=fast_path,
                        seed=cfg.seed)
    mf.write_manifest(manifest_path, "encode", key, list(bin_idx(prefix)), asdict(stats))
    print(f"encode: {model}: {stats.documents} documents, {stats.tokens} tokens ({stats.dtype}, vocab "
          f"{stats.vocab_size}, eod {stats.eod_id}) in {stats.seconds:.1f}s = {stats.tokens_per_second:,.0f} "
          f"tokens/s with {workers} worker(s), tokenizer path {stats.tokenizer_path} -> {prefix}.bin/.idx")
    return stats


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser("data.encode", "Tokenize clean.jsonl into Megatron .bin/.idx datasets, one per model.")
    add_model_arg(parser)
    parser.add_argument("--workers", type=int, help="override ENCODE_WORKERS (tokenizer threads; 0 = CPU count)")
    parser.add_argument("--tokenizer-path", choices=("auto", PATH_TOKENIZERS), default="auto",
                        help="auto: the tiktoken fast path where it is exact, else the tokenizer itself (default); "
                             "tokenizers: always the tokenizer itself")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        cfg = config_from_args(args)
        if args.workers is not None:
            cfg = cfg.replace(encode_workers=args.workers)
        for model in cfg.models:
            encode_model(cfg, model, force=args.force, progress=not args.no_progress,
                         fast_path=args.tokenizer_path == "auto")

    return run_stage("data.encode", body, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
