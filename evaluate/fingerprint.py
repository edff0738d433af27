"""Fingerprints: hashes that prove two results ran on the same data, tokenizer, model and config.

Reused by every launcher when it writes a result, and compared by
``evaluate/validate.py``: two runs whose data or tokenizer hash differ did not
train on the same tokens, whatever their config files say.

CLI: ``python -m evaluate.fingerprint --model llama`` prints the fingerprint of the
current config's data and tokenizer for that model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from data.common import sha256_file
from utils.configure import REPO_ROOT, Config, ConfigError, load_config
from utils.models import ModelShape, get_shape

FLOP_CONVENTION = "megatron-dense-v1: 6*N' + 12*L*s*h (full) and 6*N' + 6*L*s*h (causal)"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "tokenizer.model")


def hash_json(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_file(path: Path) -> str:
    return "sha256:" + sha256_file(path)


def hash_files(paths: list[Path]) -> str | None:
    """One hash over several files (names and contents); None if any is missing."""
    digest = hashlib.sha256()
    for path in paths:
        if not path.is_file():
            return None
        digest.update(path.name.encode() + b"\0" + hash_file(path).encode() + b"\0")
    return "sha256:" + digest.hexdigest()


def data_fingerprint(prefix: Path | None) -> dict[str, Any]:
    if prefix is None:
        return {"hash": None, "reason": "no dataset prefix given"}
    files = [Path(f"{prefix}.idx"), Path(f"{prefix}.bin")]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        return {"hash": None, "prefix": str(prefix), "reason": f"missing: {', '.join(missing)}"}
    return {"hash": hash_files(files), "prefix": str(prefix), "bin_bytes": files[1].stat().st_size}


def tokenizer_fingerprint(directory: Path | None) -> dict[str, Any]:
    if directory is None or not Path(directory).is_dir():
        return {"hash": None, "path": str(directory) if directory else None, "reason": "tokenizer directory missing"}
    present = [Path(directory) / name for name in TOKENIZER_FILES if (Path(directory) / name).is_file()]
    if not present:
        return {"hash": None, "path": str(directory), "reason": "no tokenizer files in directory"}
    return {"hash": hash_files(present), "path": str(directory), "files": [p.name for p in present]}


def code_revision(root: Path = REPO_ROOT) -> dict[str, Any]:
    """git commit and whether the tree had uncommitted changes; images without .git record why not."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10, check=True).stdout.strip())
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "reason": "not a git checkout (or git missing)"}


def fingerprint(
    cfg: Config,
    shape: ModelShape,
    data_prefix: Path | None,
    tokenizer_dir: Path | None,
) -> dict[str, Any]:
    """Every hash a fairness check compares."""
    return {
        "config": hash_json(cfg.workload()),
        "model_shape": hash_json(shape.as_dict()),
        "data": data_fingerprint(data_prefix),
        "tokenizer": tokenizer_fingerprint(tokenizer_dir),
        "flop_convention": FLOP_CONVENTION,
        "code": code_revision(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.fingerprint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("llama", "qwen"), required=True)
    parser.add_argument("--data-prefix", type=Path, help="Megatron data prefix (default: from config)")
    parser.add_argument("--tokenizer-dir", type=Path, help="tokenizer directory (default: from config)")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    prefix, tok = args.data_prefix, args.tokenizer_dir
    if prefix is None or tok is None:
        from utils import dataset

        prefix = prefix or dataset.dataset_prefix(cfg, args.model)
        tok = tok or dataset.tokenizer_dir(cfg, args.model)
    print(json.dumps(fingerprint(cfg, get_shape(args.model, cfg.model_size), prefix, tok), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
