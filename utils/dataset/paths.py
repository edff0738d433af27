"""Where datasets and tokenizers live on disk, and the one way to load a tokenizer.

Every consumer resolves paths here, so a dataset written by ``data/encode.py`` is exactly the one a framework reads.
Layout under ``DATA_DIR``::

    <dataset_name>/raw.jsonl, clean.jsonl, valid.jsonl, *.manifest.json     fetch/clean outputs
    <dataset_name>-<model>[-valid]_text_document.{bin,idx}                  Megatron indexed datasets
    tokenizers/<model>, tokenizers/sample-<model>                           downloaded, generated
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.config.model import Config
from utils.io.sanitise import one_line


class TokenizerMissingError(FileNotFoundError):
    """The tokenizer directory does not exist or holds no loadable tokenizer."""


def dataset_dir(cfg: Config) -> Path:
    """Directory of the raw/clean text of ``cfg.dataset``."""
    return cfg.data_dir / cfg.dataset_name


def raw_path(cfg: Config) -> Path:
    return dataset_dir(cfg) / "raw.jsonl"


def clean_path(cfg: Config) -> Path:
    return dataset_dir(cfg) / "clean.jsonl"


def valid_raw_path(cfg: Config) -> Path:
    """The fetched validation split of a corpus that has its own (c4); the others hold documents out in clean."""
    return dataset_dir(cfg) / "valid_raw.jsonl"


def valid_clean_path(cfg: Config) -> Path:
    """The held-out documents, cleaned like ``clean.jsonl`` and never in it (data/clean.py)."""
    return dataset_dir(cfg) / "valid.jsonl"


def tokenizer_dir(cfg: Config, model: str) -> Path:
    """Tokenizer of ``model`` for ``cfg.dataset``: generated for ``sample``, downloaded otherwise."""
    name = f"sample-{model}" if cfg.dataset == "sample" else model
    return cfg.data_dir / "tokenizers" / name


# Megatron's tools/preprocess_data.py appends this to an output prefix.
TEXT_DOCUMENT = "_text_document"


def dataset_prefix(cfg: Config, model: str) -> Path:
    """Megatron data prefix (no ``.bin``/``.idx``): what ``--data-path`` is given."""
    return cfg.data_dir / f"{cfg.dataset_name}-{model}{TEXT_DOCUMENT}"


def valid_prefix(cfg: Config, model: str) -> Path:
    """The held-out validation set's Megatron prefix (``--valid-data-path``): ``<dataset_name>-<model>-valid``,
    whose documents never reach the training prefix (data/clean.py)."""
    return valid_prefix_of(dataset_prefix(cfg, model))


def valid_prefix_of(train_prefix: Path) -> Path:
    """The validation prefix beside a training prefix ``<name>_text_document``: ``<name>-valid_text_document``."""
    name = Path(train_prefix).name
    stem = name.removesuffix(TEXT_DOCUMENT)
    return Path(train_prefix).with_name(f"{stem}-valid{TEXT_DOCUMENT}")


@dataclass(frozen=True)
class JobData:
    """One job's data, resolved once where its run context is made (``train/launch/context.py``) and handed on;
    ``valid`` is the held-out set's prefix when the job evaluates, else None."""

    prefix: Path
    valid: Path | None
    tokenizer_dir: Path

    @property
    def tokenizer(self) -> Any:
        """The tokenizer, loaded at first use (:func:`load_tokenizer` keeps it for the process)."""
        return load_tokenizer(self.tokenizer_dir)

    def missing(self) -> list[Path]:
        """The files of the encoded sets and the tokenizer that are not here (:func:`missing_files`)."""
        return missing_files(self.prefix, self.tokenizer_dir) + (missing_files(self.valid) if self.valid else [])


def job_data(cfg: Config, model: str) -> JobData:
    """``model``'s data under ``cfg``: the one place a job's files are named."""
    prefix = dataset_prefix(cfg, model)
    return JobData(prefix, valid_prefix_of(prefix) if cfg.evaluates else None, tokenizer_dir(cfg, model))


def missing_files(data_prefix: Path, tokenizer_dir: Path | None = None) -> list[Path]:
    """The encoded pair's files (and, given its directory, the tokenizer's file) that are not there. What a launcher's
    plan names when the data has not been prepared; whether present data is fit for training is ``data/ready.py``'s
    check, run before every real launch."""
    missing = [p for p in (Path(f"{data_prefix}.bin"), Path(f"{data_prefix}.idx")) if not p.is_file()]
    if tokenizer_dir is not None and not any((Path(tokenizer_dir) / n).is_file()
                                             for n in ("tokenizer.json", "tokenizer_config.json")):
        missing.append(Path(tokenizer_dir) / "tokenizer.json")
    return missing


# Tokenizers this process loaded, by directory and the state of its files (a launcher asks for one up to 8 times).
_LOADED: dict[tuple[str, tuple[tuple[str, int, int], ...]], Any] = {}
_LOADED_MAX = 8


def _files_state(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of every file in the tokenizer directory: a rewritten tokenizer is loaded again."""
    state = []
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        stat = file.stat()
        state.append((file.name, stat.st_size, stat.st_mtime_ns))
    return tuple(state)


def load_tokenizer(path: Path) -> Any:
    """Load a tokenizer with ``AutoTokenizer``: the same call for real and generated ones. Loaded once per process while
    its files are unchanged (callers only read it: never change the object)."""
    path = Path(path)
    if not (path / "tokenizer_config.json").is_file() and not (path / "tokenizer.json").is_file():
        raise TokenizerMissingError(
            f"no tokenizer in {path} (directory {'is empty' if path.is_dir() else 'does not exist'}); "
            "prepare the data first: ./shell/run_data.sh (or ./shell/data.sh natively)"
        )
    key = (str(path.resolve()), _files_state(path))
    if key in _LOADED:
        return _LOADED[key]
    from transformers import AutoTokenizer  # 2.5 s to import (python -X importtime): only to load one

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:  # the tokenizers library raises a bare Exception on a bad tokenizer.json (issue 33)
        raise TokenizerMissingError(f"cannot load the tokenizer in {path}: {one_line(exc, 300)}") from exc
    if len(_LOADED) >= _LOADED_MAX:
        _LOADED.pop(next(iter(_LOADED)))
    _LOADED[key] = tokenizer
    return tokenizer


def vocab_size(tokenizer: Any) -> int:
    """Token ids the tokenizer can emit, added special tokens included (Megatron's ``len(tokenizer)``)."""
    return len(tokenizer)


def eod_id(tokenizer: Any) -> int:
    """End-of-document id appended to every document: the tokenizer's eos token."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        name = getattr(tokenizer, "name_or_path", "?")
        raise ValueError(f"tokenizer {name} has no eos token, so documents cannot be terminated with EOD")
    return int(eos)
