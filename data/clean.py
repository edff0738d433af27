"""Stage 2: normalise ``raw.jsonl`` into ``clean.jsonl`` and drop documents not worth training on.

The held-out documents for ``valid.jsonl`` (C4's own validation split for ``c4``, else those whose digest falls
in :data:`HOLDOUT_BUCKETS`) are decided by the text alone, so a duplicate never lands on both sides.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from data import manifest as mf
from data.common import (
    DataError,
    base_parser,
    config_from_args,
    iter_jsonl_texts,
    run_stage,
    write_jsonl_line,
)
from utils.config.model import Config
from utils.dataset.paths import clean_path, dataset_dir, raw_path, valid_clean_path, valid_raw_path
from utils.io.atomic import atomic_path
from utils.io.hashing import sha256_file

# Bump when a rule changes, so existing clean.jsonl files are redone (2: the held-out validation set).
RULES_VERSION = 2
# Rule 5: a document is held out when the first 8 bytes of its digest, modulo HOLDOUT_BUCKETS, are 0 (1 in 50).
HOLDOUT_BUCKETS = 50

_INVISIBLE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\u200b-\u200d\u2060\ufeff]")
_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")
_PARAGRAPH_BREAKS = re.compile(r"\n{3,}")


def normalize(text: str) -> str:
    """Rules 1 and 2: canonical code points and whitespace."""
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _INVISIBLE.sub("", text)
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return _PARAGRAPH_BREAKS.sub("\n\n", text).strip()


@dataclass
class CleanCounts:
    input_documents: int = 0
    kept: int = 0
    dropped_empty: int = 0
    dropped_too_short: int = 0
    dropped_duplicate: int = 0
    kept_characters: int = 0
    held_out: int = 0  # documents written to valid.jsonl (rule 5)
    held_out_characters: int = 0


def held_out(digest: bytes) -> bool:
    """Rule 5 for the corpora without their own validation split: this document is a validation document."""
    return int.from_bytes(digest[:8], "big") % HOLDOUT_BUCKETS == 0


def has_own_validation(cfg: Config) -> bool:
    """c4 brings its own validation split (data/fetch.py fetches it); the other corpora hold documents out."""
    return cfg.dataset == "c4"


def clean_manifest_path(cfg: Config) -> Path:
    return dataset_dir(cfg) / "clean.manifest.json"


def clean(cfg: Config, force: bool = False, progress: bool = True) -> CleanCounts | None:
    """Write ``clean.jsonl`` and ``valid.jsonl``; returns the counts, or ``None`` when they were already current."""
    source, out, valid_out = raw_path(cfg), clean_path(cfg), valid_clean_path(cfg)
    if not source.is_file():
        raise DataError(f"{source}: input not found; run `python -m data.fetch` first")
    own_valid = has_own_validation(cfg)
    if own_valid and not valid_raw_path(cfg).is_file():
        raise DataError(f"{valid_raw_path(cfg)}: the validation split was not fetched; run `python -m data.fetch`")
    key = {"input_sha256": sha256_file(source), "min_doc_chars": cfg.min_doc_chars, "rules": RULES_VERSION,
           "holdout": "validation split" if own_valid else f"1 in {HOLDOUT_BUCKETS} by digest"}
    if own_valid:
        key["valid_input_sha256"] = sha256_file(valid_raw_path(cfg))
    manifest_path = clean_manifest_path(cfg)
    if not force and mf.is_current(manifest_path, key):
        print(f"clean: {out} is current (manifest {manifest_path.name}); --force to redo")
        return None

    counts = CleanCounts()
    seen: set[bytes] = set()

    def keep(raw: str) -> tuple[str, bytes] | None:
        """Rules 1-4: the normalised text and its digest, or None (dropped, counted)."""
        text = normalize(raw)
        if not text:
            counts.dropped_empty += 1
            return None
        if len(text) < cfg.min_doc_chars:
            counts.dropped_too_short += 1
            return None
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        if digest in seen:
            counts.dropped_duplicate += 1
            return None
        seen.add(digest)
        return text, digest

    with atomic_path(valid_out) as valid_tmp, valid_tmp.open("w", encoding="utf-8") as valid_stream, \
            atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as stream:
        if own_valid:  # first, so a training document equal to a validation one is dropped as a duplicate
            for raw in tqdm(iter_jsonl_texts(valid_raw_path(cfg)), desc="clean valid", unit="doc",
                            disable=not progress):
                kept = keep(raw)
                if kept is not None:
                    write_jsonl_line(valid_stream, kept[0])
                    counts.held_out += 1
                    counts.held_out_characters += len(kept[0])
        for raw in tqdm(iter_jsonl_texts(source), desc="clean", unit="doc", disable=not progress):
            counts.input_documents += 1
            kept = keep(raw)
            if kept is None:
                continue
            text, digest = kept
            if not own_valid and held_out(digest):
                write_jsonl_line(valid_stream, text)
                counts.held_out += 1
                counts.held_out_characters += len(text)
                continue
            write_jsonl_line(stream, text)
            counts.kept += 1
            counts.kept_characters += len(text)
        stream.flush()
        valid_stream.flush()
        if counts.kept == 0:
            raise DataError(
                f"{source}: the corpus is empty after cleaning ({counts.input_documents} documents in, "
                f"{counts.dropped_empty} empty, {counts.dropped_too_short} shorter than "
                f"MIN_DOC_CHARS={cfg.min_doc_chars}, {counts.dropped_duplicate} duplicates, {counts.held_out} "
                f"held out for validation); {out} not written"
            )
    mf.write_manifest(manifest_path, "clean", key, [out, valid_out], asdict(counts))
    print(
        f"clean: kept {counts.kept} of {counts.input_documents} documents -> {out}\n"
        f"clean: dropped {counts.dropped_empty} empty, {counts.dropped_too_short} too short "
        f"(< {cfg.min_doc_chars} chars), {counts.dropped_duplicate} exact duplicates\n"
        f"clean: held out {counts.held_out} documents for validation "
        f"({'the validation split' if own_valid else f'1 in {HOLDOUT_BUCKETS} by digest'}) -> {valid_out}"
    )
    return counts


def build_parser() -> argparse.ArgumentParser:
    parser = base_parser("data.clean", "Normalise raw.jsonl and drop empty, too-short and duplicate documents.")
    parser.add_argument("--min-chars", type=int, help="override MIN_DOC_CHARS")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        clean(config_from_args(args, min_chars="min_doc_chars"), force=args.force, progress=not args.no_progress)

    return run_stage(body, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
