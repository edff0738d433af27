"""Fingerprints: hashes that prove two results trained on the same data, tokenizer, model and config.

The fairness check compares them: runs whose data or tokenizer hash differ did not train on the same tokens. Paths
are recorded but not hashed; a part that cannot be hashed is ``None`` with the reason.
CLI: ``python -m utils.dataset.fingerprint --model llama`` prints the current config's fingerprint for that model.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.paths import dataset_prefix, tokenizer_dir, valid_prefix_of
from utils.io.hash_cache import cached_sha256
from utils.io.hashing import hash_files, hash_json
from utils.schema.run import CodeRevision, Fingerprint, HashedFiles
from utils.spec.models import ModelShape, get_shape
from utils.spec.registry import model_names

FLOP_CONVENTION = "megatron-dense-v1: 6*N' + 12*L*s*h (full) and 6*N' + 6*L*s*h (causal)"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "tokenizer.model")


def data_fingerprint(prefix: Path | None) -> HashedFiles:
    """Hash of a Megatron dataset pair (``<prefix>.idx`` + ``<prefix>.bin``)."""
    if prefix is None:
        return HashedFiles(reason="no dataset prefix given")
    files = [Path(f"{prefix}.idx"), Path(f"{prefix}.bin")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        return HashedFiles(path=str(prefix), reason=f"missing: {', '.join(missing)}")
    # Cached by size, inode, mtime and ctime beside the data (utils/io/hash_cache.py): a training start does
    # not re-read a multi-gigabyte .bin that verify already hashed.
    digest = hash_files(files, file_hash=lambda path: cached_sha256(path, Path(prefix).parent))
    return HashedFiles(hash=digest, path=str(prefix), files=[f.name for f in files], bytes=files[1].stat().st_size)


def tokenizer_fingerprint(directory: Path | None) -> HashedFiles:
    """Hash of the tokenizer files a Hugging Face tokenizer loads from ``directory``."""
    if directory is None or not Path(directory).is_dir():
        return HashedFiles(path=str(directory) if directory else None, reason="tokenizer directory missing")
    present = [Path(directory) / name for name in TOKENIZER_FILES if (Path(directory) / name).is_file()]
    if not present:
        return HashedFiles(path=str(directory), reason="no tokenizer files in directory")
    return HashedFiles(hash=hash_files(present), path=str(directory), files=[p.name for p in present])


def code_revision(root: Path = REPO_ROOT) -> CodeRevision:
    """git commit and whether the tree had uncommitted changes; images without .git record why not."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10, check=True).stdout.strip())
        return CodeRevision(commit=commit, dirty=dirty)
    except (OSError, subprocess.SubprocessError):
        return CodeRevision(reason="not a git checkout (or git missing)")


def config_hash(cfg: Config) -> str:
    """Hash of the workload keys: what a launch ran with (also in tprimat's log header, train/logs/patterns.py)."""
    return hash_json(cfg.workload())


def fingerprint(cfg: Config, shape: ModelShape, data_prefix: Path | None, tokenizer_dir: Path | None) -> Fingerprint:
    """Every hash a fairness check compares."""
    return Fingerprint(
        config=config_hash(cfg), model_shape=hash_json(shape.as_dict()),
        data=data_fingerprint(data_prefix), tokenizer=tokenizer_fingerprint(tokenizer_dir),
        # the validation set a run that evaluates reads (issue 34), hashed like the training pair
        valid_data=data_fingerprint(valid_prefix_of(data_prefix)) if cfg.evaluates and data_prefix else None,
        flop_convention=FLOP_CONVENTION, code=code_revision(),
    )


def log_fingerprint(shape: ModelShape, reason: str) -> Fingerprint:
    """The fingerprint of a run tprimat did not launch: its model shape and FLOP convention only. Its data, tokenizer
    and code are not on this machine, so each says why it has no hash (``reason``), and the fairness check reports them
    as "cannot verify"."""
    return Fingerprint(
        model_shape=hash_json(shape.as_dict()), data=HashedFiles(reason=reason),
        tokenizer=HashedFiles(reason=reason), flop_convention=FLOP_CONVENTION, code=CodeRevision(reason=reason),
    )


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.dataset.fingerprint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=model_names(), required=True)
    parser.add_argument("--data-prefix", type=Path, help="Megatron data prefix (default: from config)")
    parser.add_argument("--tokenizer-dir", type=Path, help="tokenizer directory (default: from config)")
    args = parser.parse_args(argv)
    cfg = load_config()

    prefix = args.data_prefix or dataset_prefix(cfg, args.model)
    tok = args.tokenizer_dir or tokenizer_dir(cfg, args.model)
    print(fingerprint(cfg, get_shape(args.model, cfg.model_size), prefix, tok).model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
