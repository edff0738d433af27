"""Stage 4: prove each ``.bin/.idx`` pair is a correct Megatron dataset of the clean corpus.

Each check fails naming the file; sampled documents re-encode with ``transformers`` itself (``data.encode`` reads
the tokenizer files without it). A passing run records ``<prefix>.verify.json`` with the hashes it checked
(training refuses a pair without one); an unchanged pair is not re-checked.
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from data import manifest as mf
from data.common import DataError, base_parser, config_from_args, iter_jsonl_texts, run_stage
from data.encode import splits
from data.encoding.idx_writer import INDEX_MAGIC
from data.manifest import bin_idx, encode_manifest_path
from data.ready import check_encoded_bytes, settings_problems, verify_report_path
from utils.config.model import Config
from utils.dataset.megatron_modules import import_dataset_modules
from utils.dataset.paths import eod_id, load_tokenizer, tokenizer_dir, vocab_size
from utils.io.hash_cache import cached_sha256
from utils.io.hashing import sha256_dir, sha256_file

HEADER_BYTES = 9 + 8 + 1 + 8 + 8
ROUND_TRIP_SAMPLES = 16
_CHUNK_TOKENS = 1 << 24


def _indexed_dataset() -> Any:
    """megatron-core's ``indexed_dataset``, without the rest of megatron.core (utils/dataset/megatron_modules.py)."""
    (module,) = import_dataset_modules("indexed_dataset")
    return module


def count_documents(jsonl: Path) -> int:
    """Documents in a JSONL file as ``iter_jsonl_texts`` yields them (blank lines skipped), without parsing."""
    with jsonl.open("rb") as stream:
        return sum(1 for line in stream if line.strip())


def read_index_header(idx_path: Path) -> dict[str, int]:
    """Parse the fixed 34-byte ``.idx`` header with clear errors for each field."""
    DType = _indexed_dataset().DType

    with idx_path.open("rb") as stream:
        header = stream.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES:
        raise DataError(f"{idx_path}: truncated index header ({len(header)} of {HEADER_BYTES} bytes)")
    if header[:9] != INDEX_MAGIC:
        raise DataError(f"{idx_path}: wrong magic {header[:9]!r}, expected {INDEX_MAGIC!r}: not a Megatron index")
    version, code, sequences, documents = struct.unpack("<QBQQ", header[9:])
    if version != 1:
        raise DataError(f"{idx_path}: index version {version}, only version 1 is supported")
    known = {member.value: member.name for member in DType}
    if code not in known:
        raise DataError(f"{idx_path}: unknown dtype code {code} (known: {known})")
    return {"version": version, "dtype_code": code, "sequences": sequences, "documents": documents}


def _check_pair(cfg: Config, model: str, tokenizer: Any, clean_hash: str, source: Path,
                prefix: Path) -> dict[str, Any]:
    indexed = _indexed_dataset()
    DType, IndexedDataset = indexed.DType, indexed.IndexedDataset

    bin_path, idx_path = bin_idx(prefix)
    for path in (idx_path, bin_path):
        if not path.is_file():
            raise DataError(f"{path}: missing; run `python -m data.encode` first")

    vocab, eod = vocab_size(tokenizer), eod_id(tokenizer)
    header = read_index_header(idx_path)
    expected_dtype = DType.optimal_dtype(vocab)
    dtype = DType.dtype_from_code(header["dtype_code"])
    if dtype != expected_dtype:
        expected_code = DType.code_from_dtype(expected_dtype)
        raise DataError(f"{idx_path}: dtype code {header['dtype_code']} ({dtype.__name__}) but a vocabulary of "
                        f"{vocab} tokens needs {expected_dtype.__name__} (code {expected_code})")
    n, d = header["sequences"], header["documents"]
    idx_bytes = HEADER_BYTES + n * 4 + n * 8 + d * 8
    if idx_path.stat().st_size != idx_bytes:
        raise DataError(f"{idx_path}: {idx_path.stat().st_size} bytes, but the header ({n} sequences, "
                        f"{d} document indices) needs {idx_bytes}: truncated or corrupt")

    encode_manifest = mf.load_manifest(encode_manifest_path(prefix))
    if encode_manifest is None:
        raise DataError(f"{prefix}: no encode manifest; this pair was not completed by data.encode (re-run it)")
    for path in (bin_path, idx_path):
        entry = encode_manifest.outputs.get(path.name)
        written = entry.bytes if entry is not None else None
        if written != path.stat().st_size:
            raise DataError(f"{path}: {path.stat().st_size} bytes, but data.encode wrote {written}: "
                            "truncated or replaced")
    check_encoded_bytes(prefix, encode_manifest)
    if encode_manifest.key.get("clean_sha256") != clean_hash:
        raise DataError(f"{prefix}: stale: encoded from a different clean.jsonl (re-run data.encode)")

    try:
        dataset = IndexedDataset(str(prefix))
    except (AssertionError, ValueError, OSError) as exc:
        raise DataError(f"{prefix}: megatron-core IndexedDataset cannot open it: {exc or type(exc).__name__}") from None
    lengths = dataset.sequence_lengths.astype(np.int64)
    doc_index = dataset.document_indices
    pointers = dataset.index.sequence_pointers if hasattr(dataset, "index") else None
    if len(dataset) != n or len(doc_index) != d:
        raise DataError(f"{idx_path}: IndexedDataset reads {len(dataset)} sequences / {len(doc_index)} indices, "
                        f"header says {n} / {d}")
    if d != n + 1 or not np.array_equal(doc_index, np.arange(d)):
        raise DataError(f"{idx_path}: expected one sequence per document (document indices 0..{n}), "
                        f"got {d - 1} documents for {n} sequences")
    expected_docs = encode_manifest.counts.get("documents")
    if n != expected_docs:
        raise DataError(f"{idx_path}: {n} documents, but data.encode wrote {expected_docs}")
    # Counted from clean.jsonl itself: the encode manifest only repeats what encode wrote, so a
    # document lost on the way would otherwise go unnoticed (round trips sample only a few).
    clean_docs = count_documents(source)
    if n != clean_docs:
        raise DataError(f"{idx_path}: {n} documents, but {source} holds {clean_docs}")
    if n and lengths.min() < 1:
        raise DataError(f"{idx_path}: document {int(np.argmin(lengths))} is empty (no EOD)")
    itemsize = np.dtype(dtype).itemsize
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) * itemsize
    if pointers is not None and not np.array_equal(np.asarray(pointers), starts):
        raise DataError(f"{idx_path}: sequence byte offsets do not match the sequence lengths")
    tokens = int(lengths.sum())
    if bin_path.stat().st_size != tokens * itemsize:
        raise DataError(f"{bin_path}: {bin_path.stat().st_size} bytes, but the index describes {tokens} tokens "
                        f"of {itemsize} bytes = {tokens * itemsize}: truncated or corrupt")

    data = np.memmap(bin_path, dtype=dtype, mode="r")
    for start in range(0, tokens, _CHUNK_TOKENS):
        chunk = data[start:start + _CHUNK_TOKENS]
        low, high = int(chunk.min()), int(chunk.max())
        if high >= vocab or low < 0:
            bad = start + int(np.argmax((chunk >= vocab) | (chunk < 0)))
            raise DataError(f"{bin_path}: token id {int(data[bad])} at position {bad} is outside the vocabulary "
                            f"[0, {vocab}) of {tokenizer_dir(cfg, model)}")
    ends = starts // itemsize + lengths - 1
    not_eod = np.flatnonzero(data[ends] != eod)
    if not_eod.size:
        raise DataError(f"{bin_path}: {not_eod.size} document(s) do not end in EOD {eod}, "
                        f"first: document {int(not_eod[0])}")
    policy = encode_manifest.token_policy
    samples = _round_trip(cfg, source, prefix, dataset, tokenizer, eod, policy.policy if policy else cfg.bos_policy)
    del data, dataset
    return {"documents": n, "tokens": tokens, "dtype": dtype.__name__, "vocab_size": vocab, "eod_id": eod,
            "round_trip_documents": samples}


def reference_ids(tokenizer: Any, text: str, policy: str) -> list[int]:
    """The ids preprocess_data writes for ``text`` (before EOD) under ``policy``, by ``transformers`` itself.
    ``megatron``: what megatron.core's ``HuggingFaceTokenizer.text_to_ids`` does at 847781764f; ``tokenizer``: the
    legacy ``_HuggingFaceTokenizer.tokenize`` of core_v0.12.0."""
    if policy == "megatron":
        return list(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)))
    return list(tokenizer(text)["input_ids"])


def _round_trip(cfg: Config, source: Path, prefix: Path, dataset: Any, tokenizer: Any, eod: int,
                policy: str) -> list[int]:
    """Decode sampled documents back to their clean text and re-encode them to the stored tokens."""
    count = len(dataset)
    picks = sorted(random.Random(cfg.seed).sample(range(count), min(ROUND_TRIP_SAMPLES, count)))
    wanted = set(picks)
    texts: dict[int, str] = {}
    for number, text in enumerate(iter_jsonl_texts(source)):
        if number in wanted:
            texts[number] = text
            if len(texts) == len(wanted):
                break
    for number in picks:
        stored = [int(t) for t in dataset[number]]
        if number not in texts:
            raise DataError(f"{prefix}: document {number} has no counterpart in {source}")
        decoded = tokenizer.decode(stored, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        if decoded != texts[number]:
            raise DataError(f"{prefix}.bin: document {number} decodes to {decoded[:60]!r}..., "
                            f"clean text is {texts[number][:60]!r}...")
        if [*reference_ids(tokenizer, texts[number], policy), eod] != stored:
            raise DataError(f"{prefix}.bin: document {number} differs from re-encoding its clean text "
                            f"(BOS_POLICY={policy})")
    return picks


def verify_model(cfg: Config, model: str, force: bool = False) -> dict[str, Any]:
    """Verify the training pair and, where data.encode wrote one, the validation pair (issue 34); the training
    pair's report."""
    result: dict[str, Any] = {}
    for label, source, prefix in splits(cfg, model):
        if label == "valid" and not any(p.is_file() for p in (*bin_idx(prefix), encode_manifest_path(prefix))):
            verify_report_path(prefix).unlink(missing_ok=True)
            continue  # no held-out documents: no validation set (a run that evaluates is refused, data/ready.py)
        report = _verify_split(cfg, model, source, prefix, force=force)
        if label == "train":
            result = report
    return result


def _verify_split(cfg: Config, model: str, source: Path, prefix: Path, force: bool) -> dict[str, Any]:
    if not source.is_file():
        raise DataError(f"{source}: missing; verify compares the dataset with it (run data.clean)")
    tok_dir = tokenizer_dir(cfg, model)
    tokenizer = load_tokenizer(tok_dir)
    bin_path, idx_path = bin_idx(prefix)
    report_path = verify_report_path(prefix)
    clean_hash = sha256_file(source)
    key = None
    try:
        if all(p.is_file() for p in (bin_path, idx_path)):
            # Hashed once (and cached by file identity): verification reads the files but never changes them.
            key = {"bin_sha256": cached_sha256(bin_path, prefix.parent),
                   "idx_sha256": cached_sha256(idx_path, prefix.parent),
                   "tokenizer_sha256": sha256_dir(tok_dir), "clean_sha256": clean_hash, "seed": cfg.seed}
            if not force and mf.is_current(report_path, key):
                settings_problems(cfg, model)  # the files are unchanged, but the config may not be
                print(f"verify: {prefix} unchanged since it passed ({report_path.name}); --force to re-check")
                report = mf.load_manifest(report_path)
                return report.counts if report is not None else {}
        result = _check_pair(cfg, model, tokenizer, clean_hash, source, prefix)
        settings_problems(cfg, model)
    except DataError:
        # A report of an earlier pass must not outlive a failure: training reads it (data/ready.py).
        report_path.unlink(missing_ok=True)
        raise
    if key is None:  # unreachable: _check_pair raises DataError when either file is missing
        raise DataError(f"{prefix}.bin/.idx: missing")
    mf.write_manifest(report_path, "verify", key, [], result)
    print(f"verify: OK {prefix}.bin/.idx: {result['documents']} documents, {result['tokens']} tokens, "
          f"{result['dtype']}, ids < {result['vocab_size']}, every document ends in EOD {result['eod_id']}, "
          f"{len(result['round_trip_documents'])} documents round-trip")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        cfg = config_from_args(args)
        failures = []
        for model in cfg.models:
            try:
                verify_model(cfg, model, force=args.force)
            except DataError as exc:
                print(f"data.verify: FAILED: {exc}", file=sys.stderr)
                failures.append(model)
        if failures:
            raise DataError(f"{len(failures)} dataset(s) failed verification: {', '.join(failures)}")

    description = "Check each encoded dataset with megatron-core's IndexedDataset."
    return run_stage(body, base_parser("data.verify", description, per_model=True), argv)


if __name__ == "__main__":
    sys.exit(main())
