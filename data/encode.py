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
paths (``data/encode_paths.py``; the log and the manifest say which one ran, and why):

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

The fast path starts from ``tokenizer.json`` while the tokenizer itself loads (that load
holds the GIL for about a second; ``tiktoken`` does not), and nothing it encodes is written
before the check has passed. The main thread writes the finished batches in order while
the next ones are encoded.
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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
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
    tool_versions,
)
from data.encode_check import dataset_sample
from data.encode_paths import (
    PATH_TIKTOKEN,
    PATH_TOKENIZERS,
    Documents,
    FastEncoder,
    HeadStart,
    batched,
    choose_encoder,
    start_head,
)
from utils.atomic import temp_sibling
from utils.configure import Config
from utils.dataset import clean_path, dataset_prefix, eod_id, load_tokenizer, tokenizer_dir, vocab_size
from utils.hashing import sha256_dir, sha256_file

BATCH_DOCUMENTS = 1024


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
    batches = batched(texts, size)
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
            if lead and isinstance(encoder, FastEncoder) and head is not None and head.result is not None:
                early = head.result
                pending.append(lambda: encoder.finish(early.result(), lead))
                starts: Iterable[list[str]] = []
            else:  # the head's documents (if any) are encoded again, by the path chosen
                starts = batched(lead, size) if lead else [first] if first else []
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
