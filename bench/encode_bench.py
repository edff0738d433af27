"""Encode speed as whole processes: ``python -m data.encode`` against Megatron-LM's ``tools/preprocess_data.py``.

Same corpus, tokenizer, workers and cores; pairs in alternating order, medians over ``--pairs`` (>= 5 to publish);
every pair's outputs must be byte-identical. ``--quick``: tprimat's figures only::

    .venv/bin/python -m bench.encode_bench --sample-mb 200 --workers 2 --pairs 5 --megatron-lm .cache/upstream/mlm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.llama3_tokenizer import write_llama3_tokenizer
from data.clean import clean
from data.common import iter_jsonl_texts, write_jsonl_line
from data.fetch import fetch_corpus, fetch_sample_tokenizers
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.paths import clean_path, dataset_prefix, raw_path, tokenizer_dir
from utils.io.atomic import atomic_path
from utils.io.hashing import sha256_file
from utils.machine.hardware import cpu_name
from utils.spec.registry import model_names

# A sentence ends in . ! ? ; (the sample generator's endings, "..." included), optionally
# closed by a quote, and is followed by whitespace (a space, or a paragraph break).
_SENTENCE_BREAK = re.compile(r'(?<=[.!?;])\s+|(?<=[.!?;]")\s+')
QUICK_MB = 0.3


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


def preprocess_data_argv(tree: Path, corpus: Path, tok_dir: Path, out_prefix: Path, workers: int,
                         python: str | None = None, legacy_tokenizer: bool = False) -> list[str]:
    """Megatron-LM's ``tools/preprocess_data.py`` as its README runs it for a Hugging Face tokenizer."""
    argv = [python or sys.executable, str(tree / "tools" / "preprocess_data.py"), "--input", str(corpus),
            "--output-prefix", str(out_prefix), "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", str(tok_dir), "--append-eod", "--workers", str(workers)]
    return argv + (["--legacy-tokenizer"] if legacy_tokenizer else [])


def megatron_env(tree: Path) -> dict[str, str]:
    """The environment preprocess_data runs in: the tree before the megatron-core wheel, offline, no GPU."""
    path = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": ""}


def tprimat_argv(model: str, workers: int) -> list[str]:
    return [sys.executable, "-m", "data.encode", "--force", "--no-progress", "--model", model,
            "--workers", str(workers)]


def tprimat_env(cfg: Config, policy: str = "megatron") -> dict[str, str]:
    return {**os.environ, "DATA_DIR": str(cfg.data_dir), "DATASET": cfg.dataset, "SAMPLE_MB": str(cfg.sample_mb),
            "MODELS": " ".join(cfg.models), "BOS_POLICY": policy, "SEED": str(cfg.seed),
            "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass
class ProcessRun:
    tool: str
    wall_s: float
    cpu_s: float  # user + system, the process and every child it waited for
    returncode: int


def run_process(tool: str, argv: list[str], env: dict[str, str], log: Path) -> ProcessRun:
    """Run ``argv`` to its end; wall time by the clock, CPU time by ``wait4``. Fails loudly on a non-zero exit."""
    with log.open("w", encoding="utf-8") as out:
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=env, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise RuntimeError(f"{tool} exited {process.returncode}:\n" + "\n".join(tail))
    return ProcessRun(tool, round(wall, 3), round(usage.ru_utime + usage.ru_stime, 3), process.returncode)


def tree_commit(tree: Path) -> str | None:
    """The Megatron-LM tree's commit (``git rev-parse HEAD``), or None for a tree without its own ``.git``."""
    if not (tree / ".git").exists():  # an exported tree inside another repository must not report that one's
        return None
    try:
        found = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                               timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None


def prepare(cfg: Config, tokenizer: str, model: str, shape: str = "documents") -> tuple[Config, Path]:
    """Generate and clean the corpus of ``cfg``, install the tokenizer; returns the config to encode with, its dir."""
    fetch_corpus(cfg, progress=False)
    if shape == "sentences":
        sentence_cfg = cfg.replace(data_dir=cfg.data_dir / "sentences")
        count = write_sentence_corpus(raw_path(cfg), raw_path(sentence_cfg))
        print(f"encode_bench: re-cut {raw_path(cfg)} into {count} one-sentence documents")
        cfg = sentence_cfg
    clean(cfg, progress=False)
    tok_dir = tokenizer_dir(cfg, model)
    if tokenizer == "llama3":
        write_llama3_tokenizer(tok_dir)
    else:
        fetch_sample_tokenizers(cfg.replace(sample_vocab=8192), raw_path(cfg))
    return cfg, tok_dir


def one_document_config(cfg: Config, tok_dir: Path, model: str) -> tuple[Config, Path]:
    """A corpus of the first document alone, with the same tokenizer: what each tool costs before encoding."""
    small = cfg.replace(data_dir=cfg.data_dir / "startup")
    corpus = clean_path(small)
    corpus.parent.mkdir(parents=True, exist_ok=True)
    with clean_path(cfg).open("rb") as source:
        corpus.write_bytes(source.readline())
    target = tokenizer_dir(small, model)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(tok_dir, target_is_directory=True)
    return small, corpus


@dataclass
class Pair:
    tprimat: ProcessRun
    megatron: ProcessRun | None
    tokens: int
    bytes_compared: int | None
    identical: bool | None


def _tprimat_outputs(cfg: Config, model: str) -> tuple[Path, Path, int]:
    prefix = dataset_prefix(cfg, model)
    manifest = json.loads(Path(f"{prefix}.manifest.json").read_text(encoding="utf-8"))
    return Path(f"{prefix}.bin"), Path(f"{prefix}.idx"), int(manifest["counts"]["tokens"])


def run_pair(index: int, cfg: Config, model: str, workers: int, tok_dir: Path, tree: Path | None,
             python: str | None, logs: Path) -> Pair:
    env = tprimat_env(cfg)
    corpus = clean_path(cfg)
    out_prefix = cfg.data_dir / "megatron" / f"out{index}"
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    order = ["tprimat", "megatron"] if index % 2 == 0 else ["megatron", "tprimat"]
    runs: dict[str, ProcessRun] = {}
    for tool in order:
        if tool == "tprimat":
            runs[tool] = run_process(tool, tprimat_argv(model, workers), env, logs / f"tprimat-{index}.log")
        elif tree is not None:
            argv = preprocess_data_argv(tree, corpus, tok_dir, out_prefix, workers, python)
            runs[tool] = run_process(tool, argv, megatron_env(tree), logs / f"megatron-{index}.log")
    bin_path, idx_path, tokens = _tprimat_outputs(cfg, model)
    if tree is None:
        return Pair(runs["tprimat"], None, tokens, None, None)
    theirs = [Path(f"{out_prefix}_text_document{suffix}") for suffix in (".bin", ".idx")]
    compared = bin_path.stat().st_size + idx_path.stat().st_size
    identical = all(sha256_file(a) == sha256_file(b) for a, b in zip((bin_path, idx_path), theirs, strict=True))
    for path in theirs:
        path.unlink()
    return Pair(runs["tprimat"], runs["megatron"], tokens, compared, identical)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def side_figures(runs: list[ProcessRun], startup: list[ProcessRun], tokens: int) -> dict[str, Any]:
    wall, cpu = _median([run.wall_s for run in runs]), _median([run.cpu_s for run in runs])
    start_wall = _median([run.wall_s for run in startup])
    return {"wall_s_median": wall, "cpu_s_median": cpu, "wall_s_runs": [run.wall_s for run in runs],
            "cpu_s_runs": [run.cpu_s for run in runs], "tokens_per_s": round(tokens / wall),
            "startup_wall_s_median": start_wall, "startup_cpu_s_median": _median([run.cpu_s for run in startup]),
            "startup_share": round(min(start_wall / wall, 1.0), 3)}


def measure(cfg: Config, model: str, workers: int, pairs: int, tok_dir: Path, tree: Path | None,
            python: str | None, logs: Path, startup_runs: int = 3) -> dict[str, Any]:
    """Start-up runs first (short), then the pairs; each finished pair is appended to ``logs/pairs.jsonl``."""
    load_before = os.getloadavg()
    small, small_corpus = one_document_config(cfg, tok_dir, model)
    startup: dict[str, list[ProcessRun]] = {"tprimat": [], "megatron": []}
    for index in range(startup_runs):
        startup["tprimat"].append(run_process("tprimat", tprimat_argv(model, workers), tprimat_env(small),
                                              logs / f"tprimat-startup-{index}.log"))
        if tree is not None:
            argv = preprocess_data_argv(tree, small_corpus, tok_dir, small.data_dir / "megatron-startup", workers,
                                        python)
            startup["megatron"].append(run_process("megatron", argv, megatron_env(tree),
                                                   logs / f"megatron-startup-{index}.log"))
    done = []
    for index in range(pairs):
        done.append(run_pair(index, cfg, model, workers, tok_dir, tree, python, logs))
        with (logs / "pairs.jsonl").open("a", encoding="utf-8") as stream:
            stream.write(json.dumps({**asdict(done[-1]), "load_average": os.getloadavg(),
                                     "finished": time.strftime("%H:%M:%S")}) + "\n")
    load_after = os.getloadavg()
    tokens = done[0].tokens
    summary: dict[str, Any] = {
        "tokens": tokens, "pairs": pairs, "workers": workers,
        "tprimat": side_figures([pair.tprimat for pair in done], startup["tprimat"], tokens),
        "load_average_1min_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "load_average_before_after": [list(map(lambda v: round(v, 2), load_before)),
                                      list(map(lambda v: round(v, 2), load_after))],
        "pair_runs": [{"tprimat": asdict(pair.tprimat), "megatron": asdict(pair.megatron) if pair.megatron else None}
                      for pair in done],
    }
    if tree is None:
        reason = "no Megatron-LM tree given (--megatron-lm or TPRIMAT_MEGATRON_LM)"
        summary.update(megatron=None, megatron_reason=reason, speedup_wall=None, speedup_cpu=None,
                       bytes_compared=None, byte_identical=None)
        return summary
    megatron = side_figures([pair.megatron for pair in done if pair.megatron], startup["megatron"], tokens)
    summary.update(
        megatron=megatron,
        speedup_wall=round(megatron["wall_s_median"] / summary["tprimat"]["wall_s_median"], 2),
        speedup_cpu=round(megatron["cpu_s_median"] / summary["tprimat"]["cpu_s_median"], 2),
        # each pair's own ratio, so a reader sees the spread the load on a shared machine makes
        speedup_wall_per_pair=[round(pair.megatron.wall_s / pair.tprimat.wall_s, 2) for pair in done if pair.megatron],
        bytes_compared=sum(pair.bytes_compared or 0 for pair in done),
        byte_identical=all(pair.identical for pair in done))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sample-mb", type=float, default=200.0, help="size of the generated corpus (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="worker count for both tools (default 2)")
    parser.add_argument("--pairs", type=int, default=5, help="paired runs; the medians count (default 5)")
    parser.add_argument("--model", choices=model_names(), default="llama", help="the dataset name's model")
    parser.add_argument("--tokenizer", choices=("llama3", "sample"), default="llama3",
                        help="llama3: the real-format Llama 3.1 tokenizer (default); sample: the generated one")
    parser.add_argument("--shape", choices=("documents", "sentences"), default="documents",
                        help="documents: the generated multi-paragraph documents (default); sentences: the same "
                             "text one sentence per document, like BookCorpus rows")
    parser.add_argument("--megatron-lm", type=Path, default=os.environ.get("TPRIMAT_MEGATRON_LM") or None,
                        help="a Megatron-LM tree whose tools/preprocess_data.py to run (default $TPRIMAT_MEGATRON_LM)")
    parser.add_argument("--megatron-python", default=os.environ.get("TPRIMAT_MEGATRON_PYTHON") or None,
                        help="the Python that runs it (default $TPRIMAT_MEGATRON_PYTHON, else this one)")
    parser.add_argument("--startup-runs", type=int, default=3, help="one-document runs of each tool (default 3)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_MB} MB, one pair, no tree (the test suite's run)")
    parser.add_argument("--work-dir", type=Path, help="keep files here (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.quick:
        args.sample_mb, args.pairs, args.startup_runs, args.megatron_lm = QUICK_MB, 1, 1, None
    if min(args.pairs, args.workers, args.startup_runs) < 1 or args.sample_mb <= 0:
        parser.error("--pairs, --workers and --startup-runs must be at least 1, --sample-mb above 0")
    tree = args.megatron_lm.resolve() if args.megatron_lm else None
    if tree is not None and not (tree / "tools" / "preprocess_data.py").is_file():
        parser.error(f"--megatron-lm {tree}: no tools/preprocess_data.py there")

    with tempfile.TemporaryDirectory(prefix="encode_bench-") as scratch:
        work = (args.work_dir or Path(scratch)).resolve()
        cfg = load_config().replace(dataset="sample", data_dir=work / "data", sample_mb=args.sample_mb,
                                    models=(args.model,), bos_policy="megatron")
        cfg, tok_dir = prepare(cfg, args.tokenizer, args.model, args.shape)
        logs = work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        corpus = clean_path(cfg)
        summary: dict[str, Any] = {
            "corpus_mb": round(corpus.stat().st_size / 1e6, 1), "documents": sum(1 for _ in corpus.open("rb")),
            "shape": args.shape, "tokenizer": args.tokenizer, "bos_policy": "megatron",
            "megatron_lm_tree": str(tree) if tree else None, "megatron_lm_commit": tree_commit(tree) if tree else None,
        }
        summary.update(measure(cfg, args.model, args.workers, args.pairs, tok_dir, tree, args.megatron_python, logs,
                               args.startup_runs))
    given = argv if argv is not None else sys.argv[1:]
    summary.update({"cpu": cpu_name() or "unknown", "cpus_available": len(os.sched_getaffinity(0)),
                    "command": " ".join(["python -m bench.encode_bench", *given])})
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if summary["byte_identical"] is False:
        print("encode_bench: the two tools' outputs differ: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
