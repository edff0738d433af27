"""Is this dataset the one the config asks for, and did exactly these bytes pass verification?

Every training job asks :func:`check_dataset` before it starts, so an edited ``.bin`` or a dataset prepared with
other data settings is refused in one line naming the file, not met later as an ``IndexError``. Nothing here
re-reads the corpus: raw and clean text are vouched for by their manifests.
"""

from __future__ import annotations

from pathlib import Path

from data import manifest as mf
from data.clean import RULES_VERSION, clean_manifest_path
from data.common import DataError
from data.fetch import _corpus_key, fetch_manifest_path, tokenizer_manifest_path
from data.manifest import bin_idx, encode_manifest_path
from data.token_policy import mismatch
from utils.config.model import Config
from utils.dataset.paths import clean_path, dataset_prefix, raw_path, tokenizer_dir, valid_clean_path, valid_prefix
from utils.io.hash_cache import cached_sha256
from utils.io.hashing import sha256_dir
from utils.spec.registry import MODELS

REDO = "prepare the data again: ./shell/run_data.sh (./shell/data.sh natively)"
# Manifest key fields that come straight from a config key.
_CONFIG_KEYS = {"samples": "DATA_SAMPLES", "seed": "SEED", "sample_mb": "SAMPLE_MB", "bpe_vocab": "SAMPLE_VOCAB",
                "min_doc_chars": "MIN_DOC_CHARS", "source": "DATASET", "config": "DATASET", "split": "DATASET"}


def verify_report_path(prefix: Path) -> Path:
    """``<prefix>.verify.json``: written by data.verify when a pair passes, naming the hashes it checked."""
    return Path(f"{prefix}.verify.json")


def _manifest(path: Path, stage: str) -> mf.Manifest:
    manifest = mf.load_manifest(path)
    if manifest is None:
        raise DataError(f"{path}: missing or unreadable (data.{stage} writes it), so nothing proves how this "
                        f"dataset was made; {REDO}")
    return manifest


def _output_hash(manifest: mf.Manifest, path: Path, manifest_path: Path) -> str:
    entry = manifest.outputs.get(path.name)
    if entry is None:
        raise DataError(f"{manifest_path}: records no sha256 for {path.name}; {REDO}")
    return entry.sha256


def _differences(manifest_path: Path, recorded: dict[str, object], expected: dict[str, object]) -> None:
    """Fail naming every setting whose recorded value differs from what this config implies."""
    wrong = [name for name, value in expected.items() if recorded.get(name) != value]
    if wrong:
        shown = ", ".join(f"{_CONFIG_KEYS.get(name, name)}: built with {recorded.get(name)!r}, "
                          f"the config gives {expected[name]!r}" for name in wrong)
        raise DataError(f"{manifest_path}: the dataset was built with other data settings ({shown}); {REDO}")


def _source_settings(cfg: Config) -> dict[str, object]:
    """The fetch manifest's key fields this config determines (without hashing a local corpus)."""
    if cfg.dataset.startswith("local:"):
        return {"source": "local"}
    return _corpus_key(cfg)


def settings_problems(cfg: Config, model: str) -> tuple[str, str]:
    """Check the manifests from fetch to encode against ``cfg``; returns (clean sha256, tokenizer sha256)."""
    fetched_path = fetch_manifest_path(cfg)
    fetched = _manifest(fetched_path, "fetch")
    _differences(fetched_path, fetched.key, _source_settings(cfg))
    raw_hash = _output_hash(fetched, raw_path(cfg), fetched_path)

    cleaned_path = clean_manifest_path(cfg)
    cleaned = _manifest(cleaned_path, "clean")
    _differences(cleaned_path, cleaned.key, {"min_doc_chars": cfg.min_doc_chars, "rules": RULES_VERSION})
    if cleaned.key.get("input_sha256") != raw_hash:
        raise DataError(f"{cleaned_path}: clean.jsonl was made from another raw.jsonl than the one fetched; {REDO}")
    clean_hash = _output_hash(cleaned, clean_path(cfg), cleaned_path)

    tok_dir = tokenizer_dir(cfg, model)
    tok_manifest_path = tokenizer_manifest_path(cfg, model)
    tok_manifest = _manifest(tok_manifest_path, "fetch")
    if cfg.dataset == "sample":
        expected = {"bpe_vocab": cfg.sample_vocab, "style": model, "trained_on": raw_hash}
    else:
        expected = {"repo": MODELS[model].shape.hf_repo}
    _differences(tok_manifest_path, tok_manifest.key, expected)
    if not tok_dir.is_dir():
        raise DataError(f"{tok_dir}: the tokenizer is missing; {REDO}")
    tok_hash = sha256_dir(tok_dir)

    prefix = dataset_prefix(cfg, model)
    encoded_path = encode_manifest_path(prefix)
    encoded = _manifest(encoded_path, "encode")
    key = encoded.key
    if key.get("model") != model:
        raise DataError(f"{encoded_path}: encoded for model {key.get('model')!r}, not {model!r}; {REDO}")
    if key.get("clean_sha256") != clean_hash:
        raise DataError(f"{encoded_path}: encoded from another clean.jsonl than the one cleaned; {REDO}")
    if key.get("tokenizer_sha256") != tok_hash:
        raise DataError(f"{encoded_path}: encoded with another tokenizer than the one in {tok_dir}; {REDO}")
    problem = mismatch(encoded.token_policy, cfg.bos_policy)
    if problem:
        raise DataError(f"{encoded_path}: the dataset {problem}; {REDO}")
    return clean_hash, tok_hash


def check_encoded_bytes(prefix: Path, encoded: mf.Manifest | None = None) -> dict[str, str]:
    """The ``.bin``/``.idx`` are byte for byte what data.encode wrote; returns their sha256 by suffix."""
    encoded_path = encode_manifest_path(prefix)
    encoded = encoded if encoded is not None else _manifest(encoded_path, "encode")
    hashes = {}
    for path in bin_idx(prefix):
        if not path.is_file():
            raise DataError(f"{path}: missing; {REDO}")
        recorded = _output_hash(encoded, path, encoded_path)
        if cached_sha256(path, prefix.parent) != recorded:
            raise DataError(f"{path}: its sha256 is not the one data.encode recorded in {encoded_path.name}: "
                            f"the file changed after encoding; {REDO}")
        hashes[path.suffix.lstrip(".")] = recorded
    return hashes


def check_dataset(cfg: Config, model: str) -> Path:
    """Everything above, and a passing ``data.verify`` on these very bytes; returns the data prefix."""
    clean_hash, tok_hash = settings_problems(cfg, model)
    prefix = dataset_prefix(cfg, model)
    _check_verified(prefix, clean_hash, tok_hash)
    if cfg.evaluates:
        _check_validation_set(cfg, model, tok_hash)
    return prefix


def dataset_problem(cfg: Config, model: str) -> str | None:
    """Why the job's dataset must not be trained on (:func:`check_dataset`'s line), or None: the launcher's check
    before a job starts (``train/launch/checks.py``), a problem it states, not an error it raises."""
    try:
        check_dataset(cfg, model)
    except (DataError, OSError) as exc:
        return f"dataset not usable: {exc}"
    return None


def _check_validation_set(cfg: Config, model: str, tok_hash: str) -> None:
    """The held-out pair an evaluating run reads: encoded from data.clean's valid.jsonl, unchanged, verified."""
    valid = valid_prefix(cfg, model)
    if not all(p.is_file() for p in bin_idx(valid)):
        raise DataError(f"evaluation (EVAL_INTERVAL={cfg.eval_interval}, EVAL_SAMPLES={cfg.eval_samples}) needs the "
                        f"validation set {valid}.bin/.idx, which is missing; {REDO}")
    cleaned_path = clean_manifest_path(cfg)
    valid_hash = _output_hash(_manifest(cleaned_path, "clean"), valid_clean_path(cfg), cleaned_path)
    encoded_path = encode_manifest_path(valid)
    key = _manifest(encoded_path, "encode").key
    if key.get("clean_sha256") != valid_hash or key.get("tokenizer_sha256") != tok_hash:
        raise DataError(f"{encoded_path}: encoded from another valid.jsonl or tokenizer than the current ones; {REDO}")
    _check_verified(valid, valid_hash, tok_hash)


def _check_verified(prefix: Path, clean_hash: str, tok_hash: str) -> None:
    """The pair is byte for byte what data.encode wrote, and data.verify passed on these bytes."""
    hashes = check_encoded_bytes(prefix)
    report_path = verify_report_path(prefix)
    report = mf.load_manifest(report_path)
    if report is None or report.stage != "verify":
        raise DataError(f"{report_path}: missing: data.verify has not passed on this dataset "
                        "(run python -m data.verify, or ./shell/data.sh)")
    key = report.key
    if (key.get("bin_sha256"), key.get("idx_sha256")) != (hashes["bin"], hashes["idx"]):
        raise DataError(f"{report_path}: data.verify passed on other bytes than the current {prefix.name}.bin/.idx "
                        "(it has not passed on these; run python -m data.verify)")
    if key.get("tokenizer_sha256") != tok_hash or key.get("clean_sha256") != clean_hash:
        raise DataError(f"{report_path}: data.verify checked another tokenizer or clean.jsonl "
                        "(run python -m data.verify)")
