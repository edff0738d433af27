"""Stage 3: tokenize ``clean.jsonl`` into a Megatron indexed dataset per model.

Output: ``<DATA_DIR>/<dataset>-<model>_text_document.{bin,idx}``, byte for byte what Megatron-LM's
``tools/preprocess_data.py --append-eod`` at ``MEGATRON_REF`` writes (the BOS per data/token_policy.py).
Documents are encoded in batches by one of the paths of ``data/encoding/paths.py``; start-up stays small (no
``transformers``, no torch) because a whole process is what is compared with ``preprocess_data``. An interrupted
run never leaves a ``.bin`` without its ``.idx`` and manifest.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data import manifest as mf
from data.common import DataError, base_parser, config_from_args, iter_jsonl_texts, run_stage
from data.encoding.check import dataset_sample
from data.encoding.idx_writer import IndexWriter, optimal_dtype
from data.encoding.paths import (
    PATH_TIKTOKEN,
    PATH_TOKENIZERS,
    Documents,
    FastEncoder,
    HeadStart,
    batched,
    choose_encoder,
    start_head,
)
from data.file_tokenizer import load_policy_tokenizer
from data.manifest import bin_idx, encode_manifest_path
from data.token_policy import TokenPolicy, record
from utils.config.model import Config
from utils.dataset.paths import (
    clean_path,
    dataset_prefix,
    eod_id,
    tokenizer_dir,
    valid_clean_path,
    valid_prefix,
    vocab_size,
)
from utils.io.atomic import temp_sibling
from utils.io.hash_cache import cached_sha256
from utils.io.hashing import sha256_dir
from utils.machine.environment import installed_versions

BATCH_DOCUMENTS = 1024
# A worker thread is worth starting only for this much corpus: below it, starting and feeding
# threads costs more than it saves (issue 24: 4 workers beat 16 on a 200 MB corpus).
BYTES_PER_WORKER = 16 << 20


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
    bos_policy: str = "megatron"
    bos: bool = False  # each document starts with BOS
    bin_sha256: str = ""  # hashed while written (recorded in the manifest's outputs, not its counts)
    idx_sha256: str = ""


def resolve_workers(requested: int) -> int:
    """``ENCODE_WORKERS=0`` means one per CPU this process may use."""
    if requested > 0:
        return requested
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def plan_workers(requested: int, corpus_bytes: int) -> int:
    """The threads worth starting: at most ``requested``, one per ``BYTES_PER_WORKER`` of corpus, at least one."""
    return max(1, min(resolve_workers(requested), -(-corpus_bytes // BYTES_PER_WORKER)))


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (then they act), so the block is never cut in two. Python-level
    handlers, not a signal mask: a signal may reach any tokenizer thread, a handler runs in the main one."""
    held = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(held))
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        return
    pending: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in held}
    for signum in held:
        signal.signal(signum, lambda received, _frame: pending.append(received))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in pending:  # now they act, with the handlers the process had
            signal.raise_signal(signum)


def publish(prefix: Path, tmp_bin: Path, tmp_idx: Path, write_manifest: Callable[[], object] | None) -> None:
    """Rename the finished pair into place and write its manifest, as one step signals cannot split (if any part
    fails, the published files are removed again)."""
    bin_path, idx_path = bin_idx(prefix)
    with signals_held():
        try:
            idx_path.unlink(missing_ok=True)  # never pair a new .bin with an old .idx
            os.replace(tmp_bin, bin_path)
            os.replace(tmp_idx, idx_path)
            if write_manifest is not None:
                write_manifest()
        except BaseException:
            for path in (encode_manifest_path(prefix), bin_path, idx_path):
                path.unlink(missing_ok=True)
            raise


def encode_documents(texts: Iterable[str], tokenizer: Any, prefix: Path, workers: int,
                     batch_documents: int | None = None, total: int | None = None,
                     progress: bool = True, check_texts: Sequence[str] | None = None,
                     tokenizer_json: Path | None = None, fast_path: bool = True,
                     head: HeadStart | None = None,
                     write_manifest: Callable[[EncodeStats], object] | None = None) -> EncodeStats:
    """Tokenize ``texts`` and write ``prefix.bin/.idx`` atomically (temp names, then rename). ``check_texts``: the
    documents the fast path must reproduce first (default: the first batch); ``write_manifest`` is called with the stats
    inside the step that publishes the pair."""
    vocab = vocab_size(tokenizer)
    eod = eod_id(tokenizer)
    dtype = optimal_dtype(vocab)
    tmp_bin = temp_sibling(prefix, ".bin")
    tmp_idx = tmp_bin.with_suffix(".idx")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    documents = 0
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
    writer: IndexWriter | None = None
    try:
        writer = IndexWriter(tmp_bin, dtype)
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
                    writer.add_documents(batch_tokens, sizes)
                    documents += len(sizes)
                    if progress:
                        elapsed = time.perf_counter() - started
                        bar.update(documents - bar.n)
                        bar.set_postfix(tokens=writer.tokens, tok_per_s=f"{writer.tokens / max(elapsed, 1e-9):,.0f}")
        if documents == 0:
            raise DataError(f"{prefix}: no documents to encode")
        bin_hash, idx_hash = writer.finalize(tmp_idx)
        seconds = time.perf_counter() - started
        tokens = writer.tokens
        stats = EncodeStats(documents=documents, tokens=tokens, seconds=round(seconds, 3),
                            tokens_per_second=round(tokens / max(seconds, 1e-9), 1), dtype=dtype.__name__,
                            vocab_size=vocab, eod_id=eod, workers=workers, tokenizer_path=encoder.path,
                            tokenizer_path_note=note, tokenizer_path_seconds=round(choice_seconds, 3),
                            bin_sha256=bin_hash, idx_sha256=idx_hash)
        publish(prefix, tmp_bin, tmp_idx, None if write_manifest is None else lambda: write_manifest(stats))
    finally:
        if writer is not None:
            writer.close()
        if head is not None:
            head.close()
        for tmp in (tmp_bin, tmp_idx):
            tmp.unlink(missing_ok=True)
    return stats


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
                progress: bool = True, fast_path: bool = True, seed: int = 0, policy: str = "megatron",
                write_manifest: Callable[[EncodeStats, TokenPolicy], object] | None = None) -> EncodeStats:
    """Encode a JSONL file with the tokenizer in ``tok_dir`` under ``policy``: the fast path starts while it loads."""
    texts = iter_jsonl_texts(source)
    head = start_head(tok_dir / "tokenizer.json", texts) if fast_path else None
    try:
        tokenizer = load_policy_tokenizer(tok_dir, policy)
        prefix_ids = tuple(tokenizer("x")["input_ids"][:1]) if tokenizer.policy_specials else ()
        bos = bool(prefix_ids) and prefix_ids[0] == tokenizer.bos_token_id
        policy_record = record(policy, (tokenizer.bos_token_id,) if bos else ())
    except BaseException:
        if head is not None:
            head.close()
        raise
    stats = encode_documents(texts, tokenizer, prefix, workers, total=total, progress=progress,
                             check_texts=dataset_sample(source, seed=seed), tokenizer_json=tok_dir / "tokenizer.json",
                             fast_path=fast_path, head=head,
                             write_manifest=None if write_manifest is None else
                             lambda stats: write_manifest(stats, policy_record))
    stats.bos_policy, stats.bos = policy, policy_record.bos
    return stats


def encode_key(cfg: Config, model: str, source: Path, tok_dir: Path) -> dict[str, Any]:
    """What determines an encoded dataset: its input and tokenizer (hashes), the token policy, the versions."""
    return {
        "model": model,
        # Cached by file identity: the clean stage hashed this file when it wrote it.
        "clean_sha256": cached_sha256(source, source.parent),
        "tokenizer_sha256": sha256_dir(tok_dir),
        "bos_policy": cfg.bos_policy,
        "versions": installed_versions(("tokenizers", "tiktoken", "numpy")),
    }


def splits(cfg: Config, model: str) -> list[tuple[str, Path, Path]]:
    """(label, clean JSONL, Megatron prefix) of the training set and, where data.clean wrote one, the held-out
    validation set (issue 34): both encoded alike, each with its own manifest and verify report."""
    return [("train", clean_path(cfg), dataset_prefix(cfg, model)),
            ("valid", valid_clean_path(cfg), valid_prefix(cfg, model))]


def encode_model(cfg: Config, model: str, force: bool = False, progress: bool = True,
                 fast_path: bool = True) -> EncodeStats | None:
    """Encode the clean corpus (and its validation set) for one model; the training set's stats, ``None`` when its
    manifest says it is current."""
    source = clean_path(cfg)
    if not source.is_file():
        raise DataError(f"{source}: input not found; run `python -m data.clean` first")
    clean_manifest = mf.read_manifest(source.parent / "clean.manifest.json") or {}
    counts = clean_manifest.get("counts", {})
    stats = None
    for label, jsonl, prefix in splits(cfg, model):
        if label == "valid" and (not jsonl.is_file() or not counts.get("held_out")):
            _remove_outputs(prefix)
            print(f"encode: {model}: no held-out documents in {jsonl}: no validation set (evaluation refused)")
            continue
        done = _encode_split(cfg, model, jsonl, prefix, counts.get("kept" if label == "train" else "held_out"),
                             force=force, progress=progress, fast_path=fast_path)
        if label == "train":
            stats = done
    return stats


def _encode_split(cfg: Config, model: str, source: Path, prefix: Path, total: int | None, *, force: bool,
                  progress: bool, fast_path: bool) -> EncodeStats | None:
    tok_dir = tokenizer_dir(cfg, model)
    key = encode_key(cfg, model, source, tok_dir)
    manifest_path = encode_manifest_path(prefix)
    if not force and mf.is_current(manifest_path, key):
        print(f"encode: {prefix}.bin/.idx are current (manifest {manifest_path.name}); --force to redo")
        return None
    _remove_outputs(prefix)
    workers = plan_workers(cfg.encode_workers, source.stat().st_size)
    os.environ.setdefault("RAYON_NUM_THREADS", str(workers))  # tokenizers' thread pool, read once per process
    bin_path, idx_path = bin_idx(prefix)

    def write_manifest(stats: EncodeStats, policy: TokenPolicy) -> None:
        counts = {k: v for k, v in asdict(stats).items() if k not in ("bin_sha256", "idx_sha256")}
        counts.update(bos_policy=policy.policy, bos=policy.bos)
        mf.write_manifest(manifest_path, "encode", key, [bin_path, idx_path], counts,
                          digests={bin_path: stats.bin_sha256, idx_path: stats.idx_sha256}, token_policy=policy)

    stats = encode_file(source, tok_dir, prefix, workers, total=total, progress=progress, fast_path=fast_path,
                        seed=cfg.seed, policy=cfg.bos_policy, write_manifest=write_manifest)
    print(f"encode: {model}: {stats.documents} documents, {stats.tokens} tokens ({stats.dtype}, vocab "
          f"{stats.vocab_size}, eod {stats.eod_id}, BOS_POLICY={stats.bos_policy}: {'BOS' if stats.bos else 'no BOS'}) "
          f"in {stats.seconds:.1f}s = {stats.tokens_per_second:,.0f} tokens/s with {workers} worker(s), "
          f"tokenizer path {stats.tokenizer_path} -> {prefix}.bin/.idx")
    return stats


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser("data.encode", "Tokenize clean.jsonl into Megatron .bin/.idx datasets, one per model.",
                         per_model=True)
    parser.add_argument("--workers", type=int, help="override ENCODE_WORKERS (tokenizer threads; 0 = CPU count; "
                                                    "a small corpus gets fewer)")
    parser.add_argument("--bos-policy", choices=("megatron", "tokenizer"),
                        help="override BOS_POLICY (megatron: no BOS, as preprocess_data@847781764f; tokenizer: the "
                             "tokenizer's own BOS, as core_v0.12.0)")
    parser.add_argument("--tokenizer-path", choices=("auto", PATH_TOKENIZERS), default="auto",
                        help="auto: the tiktoken fast path where it is exact, else the tokenizer itself (default); "
                             "tokenizers: always the tokenizer itself")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        cfg = config_from_args(args, workers="encode_workers", bos_policy="bos_policy")
        for model in cfg.models:
            encode_model(cfg, model, force=args.force, progress=not args.no_progress,
                         fast_path=args.tokenizer_path == "auto")

    return run_stage(body, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
