"""Stage 3: tokenize ``clean.jsonl`` into a Megatron indexed dataset per model.

Output: ``<DATA_DIR>/<dataset>-<model>_text_document.{bin,idx}`` (``utils.dataset.dataset_prefix``),
written by megatron-core's ``IndexedDatasetBuilder`` exactly as Megatron-LM's
``tools/preprocess_data.py --append-eod`` would: one document per input line, the
tokenizer's own special-token policy (``tokenizer(text)``, so Llama gets its BOS),
the eos id appended as EOD, dtype by megatron-core's rule (uint16 below 65500
tokens of vocabulary, else int32).

Why it is faster than ``preprocess_data.py``: that tool sends one document at a time
to a process pool, paying a Python tokenizer call and a pickled list per document.
Here documents go to the Rust tokenizer in batches (``encode_batch_fast``), which
spreads them over ``ENCODE_WORKERS`` threads with the GIL released, while the main
thread converts and writes the previous batch. Memory is bounded by two batches in
flight plus the builder's per-document index (as in Megatron).

An interrupted run never leaves a pair ``data/verify.py`` accepts: the old outputs
are removed before a redo, new ones are built under temporary names and renamed
only when complete, and the manifest is written last.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
from utils.atomic import temp_sibling
from utils.configure import Config
from utils.dataset import clean_path, dataset_prefix, eod_id, load_tokenizer, tokenizer_dir, vocab_size
from utils.hashing import sha256_dir, sha256_file

BATCH_DOCUMENTS = 1024
_SELF_CHECK_DOCUMENTS = 8


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


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(texts)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


class _BatchEncoder:
    """Token ids of a batch of documents, identical to ``tokenizer(text)["input_ids"]`` per document."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.checked = False

    def _slow(self, texts: list[str]) -> list[list[int]]:
        return list(self.tokenizer(texts, return_attention_mask=False)["input_ids"])

    def __call__(self, texts: list[str]) -> list[list[int]]:
        if self.backend is None:
            return self._slow(texts)
        ids = [encoding.ids for encoding in self.backend.encode_batch_fast(texts, add_special_tokens=True)]
        if not self.checked:
            # The Rust fast path must agree with the transformers call Megatron's tool makes;
            # if a tokenizer adds Python-side behaviour, fall back to that call instead.
            self.checked = True
            sample = texts[:_SELF_CHECK_DOCUMENTS]
            if [self.tokenizer(text)["input_ids"] for text in sample] != ids[: len(sample)]:
                print("encode: note: fast path disagrees with tokenizer(text); using the slower call")
                self.backend = None
                return self._slow(texts)
        return ids


def encode_documents(texts: Iterable[str], tokenizer: Any, prefix: Path, workers: int,
                     batch_documents: int = BATCH_DOCUMENTS, total: int | None = None,
                     progress: bool = True) -> EncodeStats:
    """Tokenize ``texts`` and write ``prefix.bin/.idx`` atomically (temp names, then rename)."""
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    vocab = vocab_size(tokenizer)
    eod = eod_id(tokenizer)
    dtype = DType.optimal_dtype(vocab)
    bin_path, idx_path = bin_idx(prefix)
    tmp_bin = temp_sibling(prefix, ".bin")
    tmp_idx = tmp_bin.with_suffix(".idx")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    encoder = _BatchEncoder(tokenizer)
    documents = tokens = 0
    started = time.perf_counter()
    try:
        builder = IndexedDatasetBuilder(str(tmp_bin), dtype=dtype)
        with tqdm(total=total, desc=f"encode {prefix.name}", unit="doc", disable=not progress) as bar, \
                ThreadPoolExecutor(max_workers=1) as pool:
            pending = None
            for batch in itertools.chain(_batches(texts, batch_documents), [None]):
                submitted = pool.submit(encoder, batch) if batch is not None else None
                if pending is not None:
                    for ids in pending.result():
                        ids.append(eod)
                        builder.add_document(ids, [len(ids)])
                        tokens += len(ids)
                        documents += 1
                    elapsed = time.perf_counter() - started
                    bar.update(documents - bar.n)
                    bar.set_postfix(tokens=tokens, tok_per_s=f"{tokens / max(elapsed, 1e-9):,.0f}")
                pending = submitted
        if documents == 0:
            raise DataError(f"{prefix}: no documents to encode")
        builder.finalize(str(tmp_idx))
        idx_path.unlink(missing_ok=True)  # never pair a new .bin with an old .idx
        os.replace(tmp_bin, bin_path)
        os.replace(tmp_idx, idx_path)
    finally:
        for tmp in (tmp_bin, tmp_idx):
            tmp.unlink(missing_ok=True)
    seconds = time.perf_counter() - started
    return EncodeStats(documents=documents, tokens=tokens, seconds=round(seconds, 3),
                       tokens_per_second=round(tokens / max(seconds, 1e-9), 1), dtype=dtype.__name__,
                       vocab_size=vocab, eod_id=eod, workers=workers)


def _remove_outputs(prefix: Path) -> None:
    """Before a redo: the manifests first, then the pair, so no stale pair is ever vouched for."""
    Path(f"{prefix}.verify.json").unlink(missing_ok=True)
    encode_manifest_path(prefix).unlink(missing_ok=True)
    for path in reversed(bin_idx(prefix)):
        path.unlink(missing_ok=True)
    for stale in prefix.parent.glob(f".{prefix.name}.tmp-*"):
        with contextlib.suppress(OSError):
            stale.unlink()


def encode_model(cfg: Config, model: str, force: bool = False, progress: bool = True) -> EncodeStats | None:
    """Encode the clean corpus for one model; ``None`` when the manifest says it is current."""
    source = clean_path(cfg)
    if not source.is_file():
        raise DataError(f"{source}: input not found; run `python -m data.clean` first")
    tok_dir = tokenizer_dir(cfg, model)
    tokenizer = load_tokenizer(tok_dir)
    prefix = dataset_prefix(cfg, model)
    key = {
        "model": model,
        "clean_sha256": sha256_file(source),
        "tokenizer_sha256": sha256_dir(tok_dir),
        "special_tokens": "tokenizer default + eos appended",
        "versions": tool_versions("tokenizers", "transformers", "megatron-core", "numpy"),
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
    stats = encode_documents(iter_jsonl_texts(source), tokenizer, prefix, workers, total=total, progress=progress)
    mf.write_manifest(manifest_path, "encode", key, list(bin_idx(prefix)), asdict(stats))
    print(f"encode: {model}: {stats.documents} documents, {stats.tokens} tokens ({stats.dtype}, vocab "
          f"{stats.vocab_size}, eod {stats.eod_id}) in {stats.seconds:.1f}s = {stats.tokens_per_second:,.0f} "
          f"tokens/s with {workers} worker(s) -> {prefix}.bin/.idx")
    return stats


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser("data.encode", "Tokenize clean.jsonl into Megatron .bin/.idx datasets, one per model.")
    add_model_arg(parser)
    parser.add_argument("--workers", type=int, help="override ENCODE_WORKERS (tokenizer threads; 0 = CPU count)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        cfg = config_from_args(args)
        if args.workers is not None:
            cfg = cfg.replace(encode_workers=args.workers)
        for model in cfg.models:
            encode_model(cfg, model, force=args.force, progress=not args.no_progress)

    return run_stage("data.encode", body, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
