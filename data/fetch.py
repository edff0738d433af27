"""Stage 1: get the raw corpus and the tokenizers into ``DATA_DIR``.

``bc`` / ``c4``: the first ``DATA_SAMPLES`` documents streamed with ``datasets``; ``sample``: the generated corpus
(``data/sample_corpus.py``); ``local:<path>``: JSONL, plain text or a directory, copied to ``raw.jsonl``.
The two network calls (:func:`open_hub_stream`, :func:`download_tokenizer_files`) are thin so the rest is tested
offline.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data import manifest as mf
from data import sample_corpus
from data.common import DataError, base_parser, config_from_args, iter_jsonl_texts, run_stage, write_jsonl_line
from utils.config.model import Config
from utils.config.secret import read_secret
from utils.dataset.paths import dataset_dir, load_tokenizer, raw_path, tokenizer_dir, valid_raw_path
from utils.io.atomic import atomic_path, temp_sibling
from utils.io.hashing import sha256_dir, sha256_file
from utils.machine.environment import installed_versions
from utils.spec.registry import MODELS


@dataclass(frozen=True)
class HubDataset:
    """A corpus on the Hugging Face Hub in a script-free format (parquet/json) that streams."""

    repo: str
    config: str | None
    split: str
    text_field: str = "text"


# BookCorpus: the original `bookcorpus` repo relies on a loading script, which current
# `datasets` no longer runs; rojagtap/bookcorpus holds the same 74M rows as parquet.
HUB_DATASETS: dict[str, HubDataset] = {
    "bc": HubDataset("rojagtap/bookcorpus", None, "train"),
    "c4": HubDataset("allenai/c4", "en", "train"),
}
# Corpora with their own held-out split (issue 34): its first documents are the validation set, one for every
# VALID_SHARE training documents (the share data/clean.py holds out of the other corpora). MLPerf's Llama 3.1 8B
# evaluates on C4's validation split too.
VALIDATION_SPLITS: dict[str, HubDataset] = {"c4": HubDataset("allenai/c4", "en", "validation")}
VALID_SHARE = 50


def valid_documents(cfg: Config) -> int:
    """How many validation-split documents a corpus with its own split fetches."""
    return max(1, cfg.data_samples // VALID_SHARE)


# A model's tokenizer repository, and whether it is gated, are its registry row's (utils/spec/registry.py).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model")
LOCAL_SUFFIXES = (".jsonl", ".json", ".txt", ".text", ".md")


def fetch_manifest_path(cfg: Config) -> Path:
    return dataset_dir(cfg) / "fetch.manifest.json"


def tokenizer_manifest_path(cfg: Config, model: str) -> Path:
    directory = tokenizer_dir(cfg, model)
    return directory.with_name(directory.name + ".manifest.json")


def open_hub_stream(source: HubDataset) -> Iterable[dict[str, Any]]:
    """Stream a Hub corpus record by record; nothing beyond what is read is downloaded."""
    from datasets import load_dataset  # 3.2 s to import (python -X importtime): the Hub corpora only

    return load_dataset(source.repo, source.config, split=source.split, streaming=True)


def download_tokenizer_files(repo: str, destination: Path, token: str | None) -> None:
    """Download only the tokenizer files of a model repository."""
    # Local: huggingface_hub (and its HTTP client) is 0.15 s of every launcher start, which imports this module for
    # the dataset check (python -X importtime -c "import data.ready", this host); only a tokenizer fetch needs it.
    from huggingface_hub import snapshot_download

    snapshot_download(repo_id=repo, allow_patterns=list(TOKENIZER_FILES), local_dir=str(destination), token=token)


def _hub_documents(cfg: Config, source: HubDataset, progress: bool, count: int | None = None) -> Iterator[str]:
    count = cfg.data_samples if count is None else count
    try:
        stream = iter(open_hub_stream(source))
        with tqdm(total=count, desc=f"fetch {cfg.dataset} {source.split}", unit="doc", disable=not progress) as bar:
            for record in itertools.islice(stream, count):
                text = record.get(source.text_field) if isinstance(record, dict) else None
                if not isinstance(text, str):
                    raise DataError(f"{source.repo}: record without a string '{source.text_field}' field")
                bar.update(1)
                yield text
    except DataError:
        raise
    except Exception as exc:  # datasets/fsspec/network errors have no common base class
        raise DataError(f"cannot stream {source.repo} ({source.config or 'default'}): "
                        f"{type(exc).__name__}: {exc}") from exc


def local_files(spec: str) -> list[Path]:
    """The files behind ``DATASET=local:<path>``, in a stable order."""
    path = Path(spec[len("local:"):]).expanduser()
    if not path.exists():
        raise DataError(f"DATASET=local:{path}: {path} does not exist")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in LOCAL_SUFFIXES)
        if not files:
            raise DataError(f"DATASET=local:{path}: no {', '.join(LOCAL_SUFFIXES)} files in the directory")
        return files
    if not path.is_file():  # a FIFO would block, /dev/zero never end (issue 33)
        raise DataError(f"DATASET=local:{path}: not a regular file or a directory")
    return [path]


def _plain_text_documents(path: Path) -> Iterator[str]:
    """Documents of a plain-text file: blocks separated by blank lines, streamed."""
    block: list[str] = []
    try:
        with path.open(encoding="utf-8") as stream:
            for line in stream:
                if line.strip():
                    block.append(line)
                elif block:
                    yield "".join(block)
                    block = []
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if block:
        yield "".join(block)


def _local_documents(files: list[Path]) -> Iterator[str]:
    for file in files:
        if not os.access(file, os.R_OK):
            raise DataError(f"{file}: cannot read (permission denied)")
        if file.suffix.lower() in (".jsonl", ".json"):
            yield from iter_jsonl_texts(file)
        else:
            yield from _plain_text_documents(file)


def _corpus_key(cfg: Config) -> dict[str, Any]:
    if cfg.dataset == "sample":
        return {"source": "sample", "seed": cfg.seed, "sample_mb": cfg.sample_mb,
                "generator": sample_corpus.GENERATOR_VERSION}
    if cfg.dataset.startswith("local:"):
        files = local_files(cfg.dataset)
        for file in files:
            if not os.access(file, os.R_OK):
                raise DataError(f"{file}: cannot read (permission denied)")
        return {"source": "local", "files": {str(f.resolve()): sha256_file(f) for f in files}}
    source = HUB_DATASETS[cfg.dataset]
    key = {"source": source.repo, "config": source.config, "split": source.split, "samples": cfg.data_samples}
    if cfg.dataset in VALIDATION_SPLITS:
        key["valid_split"] = VALIDATION_SPLITS[cfg.dataset].split
    return key


def fetch_corpus(cfg: Config, force: bool = False, progress: bool = True) -> Path:
    """Write ``<DATA_DIR>/<dataset>/raw.jsonl`` unless the manifest says it is current."""
    out = raw_path(cfg)
    manifest_path = fetch_manifest_path(cfg)
    key = _corpus_key(cfg)
    if not force and mf.is_current(manifest_path, key):
        print(f"fetch: {out} is current (manifest {manifest_path.name}); --force to redo")
        return out
    count = 0
    with atomic_path(out) as tmp:
        if cfg.dataset == "sample":
            spec = sample_corpus.SampleSpec(seed=cfg.seed, target_bytes=int(cfg.sample_mb * 1_000_000))
            count = sample_corpus.write_corpus(spec, tmp)
        else:
            if cfg.dataset.startswith("local:"):
                documents = _local_documents(local_files(cfg.dataset))
            else:
                documents = _hub_documents(cfg, HUB_DATASETS[cfg.dataset], progress)
            with tmp.open("w", encoding="utf-8") as stream:
                for text in documents:
                    write_jsonl_line(stream, text)
                    count += 1
        if count == 0:
            raise DataError(f"{cfg.dataset}: the source produced no documents; nothing written to {out}")
    if not cfg.dataset.startswith(("sample", "local:")) and count < cfg.data_samples:
        print(f"fetch: warning: {cfg.dataset} ended after {count} of DATA_SAMPLES={cfg.data_samples} documents",
              file=sys.stderr)
    outputs, counts = [out], {"documents": count}
    if cfg.dataset in VALIDATION_SPLITS:
        valid_out = valid_raw_path(cfg)
        with atomic_path(valid_out) as tmp, tmp.open("w", encoding="utf-8") as stream:
            counts["valid_documents"] = 0
            for text in _hub_documents(cfg, VALIDATION_SPLITS[cfg.dataset], progress, valid_documents(cfg)):
                write_jsonl_line(stream, text)
                counts["valid_documents"] += 1
        outputs.append(valid_out)
        print(f"fetch: wrote {counts['valid_documents']} validation documents to {valid_out}")
    mf.write_manifest(manifest_path, "fetch", key, outputs, counts)
    print(f"fetch: wrote {count} documents to {out}")
    return out


def _replace_dir(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _install_tokenizer(final: Path, build: Callable[[Path], None]) -> list[Path]:
    """Build a tokenizer in a temporary sibling directory, check it loads, then swap it into place (a failure leaves
    ``final`` as it was); returns the installed files."""
    tmp = temp_sibling(final)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        build(tmp)
        load_tokenizer(tmp)  # refuse to install a tokenizer that does not load
        _replace_dir(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(p for p in final.rglob("*") if p.is_file())


def _hf_token(repo: str, gated: bool) -> str | None:
    token = read_secret("HF_TOKEN")
    if token is None and gated:
        raise DataError(
            f"{repo} is a gated repository and HF_TOKEN is not set: accept its licence on "
            f"https://huggingface.co/{repo}, then put HF_TOKEN=<your token> in secrets.env "
            "(copy secrets.env.example) or export HF_TOKEN"
        )
    return token


def fetch_real_tokenizer(cfg: Config, model: str, force: bool = False) -> Path:
    repo, gated = MODELS[model].shape.hf_repo, MODELS[model].gated
    final = tokenizer_dir(cfg, model)
    manifest_path = tokenizer_manifest_path(cfg, model)
    key = {"repo": repo, "files": list(TOKENIZER_FILES)}
    if not force and mf.is_current(manifest_path, key) and final.is_dir():
        print(f"fetch: tokenizer {final} is current; --force to redo")
        return final
    token = _hf_token(repo, gated)

    def download(tmp: Path) -> None:
        try:
            download_tokenizer_files(repo, tmp, token)
        except Exception as exc:  # hub errors: gated, not found, offline...
            message = str(exc).replace(token, "<HF_TOKEN>") if token else str(exc)
            hint = " (is HF_TOKEN in secrets.env valid and the licence accepted?)" if gated else ""
            raise DataError(f"cannot download the tokenizer of {repo}{hint}: {type(exc).__name__}: {message}") from None
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's download metadata

    outputs = _install_tokenizer(final, download)
    mf.write_manifest(manifest_path, "fetch-tokenizer", key, outputs, {"files": len(outputs)})
    print(f"fetch: tokenizer of {repo} saved to {final}")
    return final


def fetch_sample_tokenizers(cfg: Config, corpus: Path, force: bool = False) -> list[Path]:
    """Train the sample BPE once and save one tokenizer per model (skipped when current)."""
    corpus_hash = sha256_file(corpus)
    versions = installed_versions(("tokenizers", "transformers"))
    bases: dict[str, Any] = {}  # one trained BPE per tokenizer kind (byte-level, SentencePiece-style)
    done = []
    for model in cfg.models:
        final = tokenizer_dir(cfg, model)
        manifest_path = tokenizer_manifest_path(cfg, model)
        kind = MODELS[model].tokenizer.kind
        key = {"trained_on": corpus_hash, "bpe_vocab": cfg.sample_vocab, "style": model, "kind": kind,
               "generator": sample_corpus.GENERATOR_VERSION, "versions": versions}
        if not force and mf.is_current(manifest_path, key):
            print(f"fetch: tokenizer {final} is current; --force to redo")
            done.append(final)
            continue
        if kind not in bases:
            print(f"fetch: training a {cfg.sample_vocab}-token {kind} BPE on {corpus.name}")
            bases[kind] = sample_corpus.train_base_tokenizer(corpus, cfg.sample_vocab, kind)
        outputs = _install_tokenizer(final, partial(sample_corpus.save_model_tokenizer, bases[kind], model))
        mf.write_manifest(manifest_path, "fetch-tokenizer", key, outputs, {"tokenizer_sha256": sha256_dir(final)})
        print(f"fetch: sample tokenizer for {model} saved to {final}")
        done.append(final)
    return done


def fetch(cfg: Config, force: bool = False, progress: bool = True) -> None:
    if cfg.hf_home:
        os.environ["HF_HOME"] = str(cfg.hf_home)
    corpus = fetch_corpus(cfg, force=force, progress=progress)
    if cfg.dataset == "sample":
        fetch_sample_tokenizers(cfg, corpus, force=force)
    else:
        for model in cfg.models:
            fetch_real_tokenizer(cfg, model, force=force)


def main(argv: Sequence[str] | None = None) -> int:
    def body(args: argparse.Namespace) -> None:
        fetch(config_from_args(args), force=args.force, progress=not args.no_progress)

    description = "Fetch (or generate) the raw corpus and the tokenizers into DATA_DIR."
    return run_stage(body, base_parser("data.fetch", description, per_model=True), argv)


if __name__ == "__main__":
    sys.exit(main())
