"""Stage 2: normalise ``raw.jsonl`` into ``clean.jsonl`` and drop documents not worth training on.

Rules, applied in this order to every document (streamed, one at a time):

1. Unicode NFC, so the same text always has the same code points (and tokens);
   control and zero-width characters removed.
2. Whitespace: CR/LF unified to ``\\n``, every other whitespace run (tabs, NBSP...)
   becomes one space, lines stripped, three or more newlines become a paragraph break.
3. Drop the document if it is now empty, or shorter than ``MIN_DOC_CHARS`` characters.
4. Drop exact duplicates of an earlier kept document (16-byte digests in memory,
   so memory grows with the document count, never with the corpus size).

How many documents each rule dropped is printed and recorded in the manifest.
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
from utils.config.load import Config
from utils.dataset.paths import clean_path, dataset_dir, raw_path
from utils.files.atomic import atomic_path
from utils.files.hashing import sha256_file

# Bump when a rule changes, so existing clean.jsonl files are redone.
RULES_VERSION = 1

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


def clean_manifest_path(cfg: Config) -> Path:
    return dataset_dir(cfg) / "clean.manifest.json"


def clean(cfg: Config, force: bool = False, progress: bool = True) -> CleanCounts | None:
    """Write ``clean.jsonl``; returns the counts, or ``None`` when it was already current."""
    source, out = raw_path(cfg), clean_path(cfg)
    if not source.is_file():
        raise DataError(f"{source}: input not found; run `python -m data.fetch` first")
    key = {"input_sha256": sha256_file(source), "min_doc_chars": cfg.min_doc_chars, "rules": RULES_VERSION}
    manifest_path = clean_manifest_path(cfg)
    if not force and mf.is_current(manifest_path, key):
        print(f"clean: {out} is current (manifest {manifest_path.name}); --force to redo")
        return None

    counts = CleanCounts()
    seen: set[bytes] = set()
    with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as stream:
        for raw in tqdm(iter_jsonl_texts(source), desc="clean", unit="doc", disable=not progress):
            counts.input_documents += 1
            text = normalize(raw)
            if not text:
                counts.dropped_empty += 1
                continue
            if len(text) < cfg.min_doc_chars:
                counts.dropped_too_short += 1
                continue
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
            if digest in seen:
                counts.dropped_duplicate += 1
                continue
            seen.add(digest)
            write_jsonl_line(stream, text)
            counts.kept += 1
            counts.kept_characters += len(text)
        stream.flush()
        if counts.kept == 0:
            raise DataError(
                f"{source}: the corpus is empty after cleaning ({counts.input_documents} documents in, "
                f"{counts.dropped_empty} empty, {counts.dropped_too_short} shorter than "
                f"MIN_DOC_CHARS={cfg.min_doc_chars}, {counts.dropped_duplicate} duplicates); {out} not written"
            )
    mf.write_manifest(manifest_path, "clean", key, [out], asdict(counts))
    print(
        f"clean: kept {counts.kept} of {counts.input_documents} documents -> {out}\n"
        f"clean: dropped {counts.dropped_empty} empty, {counts.dropped_too_short} too short "
        f"(< {cfg.min_doc_chars} chars), {counts.dropped_duplicate} exact duplicates"
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
