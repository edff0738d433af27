"""Encode throughput: ``data/encode.py`` against the approach of Megatron-LM's ``tools/preprocess_data.py``.

The baseline reproduces what that tool does for ``--append-eod`` without sentence
splitting: a ``multiprocessing.Pool`` of ``--workers`` processes, each line of the
JSONL sent to ``Encoder.encode`` (``json.loads``, ``tokenizer(text)``, eos appended)
with ``imap(..., chunksize=32)``, and the main process calling
``IndexedDatasetBuilder.add_document`` per document. Both sides get the same
tokenizer (loaded through ``utils.dataset.load_tokenizer``), the same corpus and the
same worker count; their outputs must be byte-identical or the benchmark fails.

``--shape sentences`` re-cuts the same generated text into one sentence per document,
the shape of BookCorpus rows (~20 tokens each), before the same clean stage: there the
baseline's fixed cost per document (``json.loads``, a pool task, a pickled list, the
``transformers`` call wrapper, ``add_document``) weighs far more than on the default
multi-paragraph documents (~215 tokens each).

Each side runs ``--repeats`` times, interleaved, timed from start (pool creation /
tokenizer load) to the finalized ``.idx``; the best run of each is compared, since
on a shared machine the slow runs measure the neighbours, not the code.

    .venv/bin/python -m bench.encode_bench --sample-mb 16 --workers 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.clean import clean
from data.common import iter_jsonl_texts, write_jsonl_line
from data.encode import bin_idx, encode_documents, resolve_workers
from data.fetch import fetch
from utils.atomic import atomic_path
from utils.configure import Config, load_config
from utils.dataset import clean_path, eod_id, load_tokenizer, raw_path, tokenizer_dir, vocab_size
from utils.hardware import cpu_name
from utils.hashing import sha256_file

# A sentence ends in . ! ? ; (the sample generator's endings, "..." included), optionally
# closed by a quote, and is followed by whitespace (a space, or a paragraph break).
_SENTENCE_BREAK = re.compile(r'(?<=[.!?;])\s+|(?<=[.!?;]")\s+')


def split_sentences(text: str) -> list[str]:
    """The sentences of one document, in order, without the whitespace between them."""
    return [piece for piece in _SENTENCE_BREAK.split(text) if piece.strip()]


def write_sentence_corpus(documents: Path, out: Path) -> int:
    """One JSONL line per sentence of ``documents`` (atomically); returns the sentence count."""
    count = 0
    with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8") as stream:
        for text in iter_jsonl_texts(documents):
            for sentence in split_sentences(text):
                write_jsonl_line(stream, sentence)
                count += 1
    return count


def prepare_corpus(cfg: Config, shape: str) -> Config:
    """Generate the sample corpus and tokenizers; for ``sentences``, re-cut it before cleaning.

    Returns the config whose ``clean_path`` is the corpus to encode. The sentence corpus
    lives under its own ``DATA_DIR`` so the documents' fetch manifest stays true.
    """
    fetch(cfg, progress=False)
    if shape == "sentences":
        sentence_cfg = cfg.replace(data_dir=cfg.data_dir / "sentences")
        count = write_sentence_corpus(raw_path(cfg), raw_path(sentence_cfg))
        print(f"encode_bench: re-cut {raw_path(cfg)} into {count} one-sentence documents")
        cfg = sentence_cfg
    clean(cfg, progress=False)
    return cfg


@dataclass
class Run:
    method: str
    seconds: float
    tokens: int

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


class _PreprocessDataEncoder:
    """The per-document encoder of ``tools/preprocess_data.py`` (one pool task per JSONL line)."""

    tokenizer: Any = None
    eod: int = -1

    def __init__(self, tokenizer_path: Path) -> None:
        self.tokenizer_path = tokenizer_path

    def initializer(self) -> None:
        _PreprocessDataEncoder.tokenizer = load_tokenizer(self.tokenizer_path)
        _PreprocessDataEncoder.eod = eod_id(_PreprocessDataEncoder.tokenizer)

    def encode(self, json_line: str) -> tuple[list[int], list[int]]:
        text = json.loads(json_line)["text"]
        ids = _PreprocessDataEncoder.tokenizer(text)["input_ids"]
        if ids:
            ids.append(_PreprocessDataEncoder.eod)
        return ids, [len(ids)] if ids else []


def run_baseline(corpus: Path, tokenizer_path: Path, prefix: Path, workers: int, vocab: int) -> Run:
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    started = time.perf_counter()
    encoder = _PreprocessDataEncoder(tokenizer_path)
    bin_path, idx_path = bin_idx(prefix)
    tokens = 0
    with multiprocessing.get_context("fork").Pool(workers, initializer=encoder.initializer) as pool, \
            corpus.open(encoding="utf-8") as lines:
        builder = IndexedDatasetBuilder(str(bin_path), dtype=DType.optimal_dtype(vocab))
        for ids, lengths in pool.imap(encoder.encode, lines, 32):
            builder.add_document(ids, lengths)
            tokens += len(ids)
        builder.finalize(str(idx_path))
    return Run("preprocess_data-style", time.perf_counter() - started, tokens)


def run_tprimat(corpus: Path, tokenizer_path: Path, prefix: Path, workers: int) -> Run:
    started = time.perf_counter()
    tokenizer = load_tokenizer(tokenizer_path)
    stats = encode_documents(iter_jsonl_texts(corpus), tokenizer, prefix, workers, progress=False)
    return Run("data/encode.py", time.perf_counter() - started, stats.tokens)


def run_tokenizer_only(corpus: Path, tokenizer_path: Path) -> Run:
    """The ceiling: the Rust tokenizer alone on in-memory texts (no JSON, no Python ids, no writing)."""
    backend = load_tokenizer(tokenizer_path).backend_tokenizer
    texts = list(iter_jsonl_texts(corpus))
    started = time.perf_counter()
    tokens = 0
    for start in range(0, len(texts), 1024):
        encodings = backend.encode_batch_fast(texts[start:start + 1024], add_special_tokens=True)
        tokens += sum(len(encoding) for encoding in encodings) + len(encodings)
    return Run("tokenizer alone (ceiling)", time.perf_counter() - started, tokens)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sample-mb", type=float, default=16.0, help="size of the generated corpus (default 16)")
    parser.add_argument("--workers", type=int, default=None, help="worker count for both (default ENCODE_WORKERS)")
    parser.add_argument("--model", choices=("llama", "qwen"), default="llama", help="whose sample tokenizer")
    parser.add_argument("--shape", choices=("documents", "sentences"), default="documents",
                        help="documents: the generated multi-paragraph documents (default); sentences: the same "
                             "text one sentence per document, like BookCorpus rows")
    parser.add_argument("--repeats", type=int, default=3, help="runs per method, interleaved (best counts)")
    parser.add_argument("--work-dir", type=Path, help="keep files here (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    cfg = load_config()
    workers = args.workers if args.workers is not None else resolve_workers(cfg.encode_workers)
    os.environ["RAYON_NUM_THREADS"] = str(workers)  # before the first parallel encode of this process
    with tempfile.TemporaryDirectory(prefix="encode_bench-") as scratch:
        work = (args.work_dir or Path(scratch)).resolve()
        cfg = cfg.replace(dataset="sample", data_dir=work, sample_mb=args.sample_mb, models=(args.model,))
        tok_path = tokenizer_dir(cfg, args.model)
        corpus = clean_path(prepare_corpus(cfg, args.shape))
        documents = sum(1 for _ in iter_jsonl_texts(corpus))
        vocab = vocab_size(load_tokenizer(tok_path))
        import megatron.core.datasets.indexed_dataset  # noqa: F401  (import once, outside every timed run)
        runs: list[Run] = []
        digests: dict[str, set[tuple[str, str]]] = {}
        load_before = os.getloadavg()
        for repeat in range(args.repeats):
            for method in ("baseline", "tprimat"):
                prefix = work / f"bench-{method}-{repeat}"
                if method == "baseline":
                    run = run_baseline(corpus, tok_path, prefix, workers, vocab)
                else:
                    run = run_tprimat(corpus, tok_path, prefix, workers)
                runs.append(run)
                bin_path, idx_path = bin_idx(prefix)
                digests.setdefault(method, set()).add((sha256_file(bin_path), sha256_file(idx_path)))
                bin_path.unlink()
                idx_path.unlink()
                print(f"  {run.method:24s} run {repeat + 1}: {run.seconds:6.2f} s  "
                      f"{run.tokens_per_second:12,.0f} tokens/s")
        ceiling = max((run_tokenizer_only(corpus, tok_path) for _ in range(args.repeats)),
                      key=lambda r: r.tokens_per_second)
        print(f"  {ceiling.method:24s} best : {ceiling.seconds:6.2f} s  {ceiling.tokens_per_second:12,.0f} tokens/s")
        load_after = os.getloadavg()

    identical = len(digests["baseline"]) == 1 and digests["baseline"] == digests["tprimat"]
    best = {name: max((r for r in runs if r.method == name), key=lambda r: r.tokens_per_second)
            for name in ("preprocess_data-style", "data/encode.py")}
    ratio = best["data/encode.py"].tokens_per_second / best["preprocess_data-style"].tokens_per_second
    summary = {
        "corpus_mb": args.sample_mb, "shape": args.shape, "model_tokenizer": f"sample-{args.model}",
        "documents": documents, "tokens": runs[0].tokens, "tokens_per_document": round(runs[0].tokens / documents, 1),
        "workers": workers, "repeats": args.repeats,
        "baseline_tokens_per_s": round(best["preprocess_data-style"].tokens_per_second),
        "tprimat_tokens_per_s": round(best["data/encode.py"].tokens_per_second),
        "ratio": round(ratio, 2), "byte_identical": identical,
        "tokenizer_only_tokens_per_s": round(ceiling.tokens_per_second),
        "ceiling_ratio_vs_baseline": round(
            ceiling.tokens_per_second / best["preprocess_data-style"].tokens_per_second, 2),
        "cpu": cpu_name() or "unknown", "cpus_available": len(os.sched_getaffinity(0)),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if not identical:
        print("encode_bench: outputs differ between the methods (or between runs): FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
