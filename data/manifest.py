"""Small JSON manifests that make every data stage idempotent.

A manifest records a stage run's *key* (parameters, input hashes, tool versions) and each output's sha256; a stage
is skipped only when the key is unchanged and every output keeps its hash. Paths are relative to the manifest's
folder, so a ``DATA_DIR`` mounted elsewhere stays valid.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from data.common import DataError
from data.token_policy import TokenPolicy
from utils.io.atomic import atomic_path
from utils.io.hash_cache import cached_sha256, remember_sha256
from utils.io.json_input import read_json

SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 16 << 20  # a manifest is a few kilobytes; a bigger one is not ours


class ManifestMalformed(DataError):
    """A manifest is valid JSON of the wrong shape. The message is one line naming the file and the field."""


class OutputRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class Manifest(BaseModel):
    """What every data stage records: the key of its run, its outputs' hashes, its counts."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    schema_version: int = Field(alias="schema")
    stage: str
    key: dict[str, Any]
    outputs: dict[str, OutputRecord]
    counts: dict[str, Any]
    created: str | None = None
    token_policy: TokenPolicy | None = None  # encode manifests (data/token_policy.py)


_PROBLEMS = {"dict_type": "must be a mapping", "model_type": "must be a mapping", "missing": "is missing",
             "string_type": "must be a string", "int_type": "must be an integer", "bool_type": "must be true or false",
             "list_type": "must be a list", "extra_forbidden": "is not a manifest field",
             "string_pattern_mismatch": "must be a hex sha256", "greater_than_equal": "must not be negative",
             "literal_error": "is not a known value"}


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "the manifest"
    return f"{where} {_PROBLEMS.get(error['type'], error['msg'])}"


def bin_idx(prefix: Path) -> tuple[Path, Path]:
    """The encoded dataset's two files. Here, not in data/encode.py, so the launcher's dataset check (data/ready.py)
    does not import the encoder's numpy and tokenizers (0.1 s of every launcher start, -X importtime)."""
    return Path(f"{prefix}.bin"), Path(f"{prefix}.idx")


def encode_manifest_path(prefix: Path) -> Path:
    return Path(f"{prefix}.manifest.json")


def load_manifest(path: Path) -> Manifest | None:
    """The typed manifest; ``None`` when missing, unreadable, not JSON or of another schema version."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ManifestMalformed(f"{path}: manifest malformed: larger than {MAX_MANIFEST_BYTES} bytes")
        data = read_json(path, max_bytes=MAX_MANIFEST_BYTES)  # a regular file, bounded in size and depth
    except (OSError, ValueError):  # JsonInputError is a ValueError
        return None
    if not isinstance(data, dict):
        raise ManifestMalformed(f"{path}: manifest malformed: not a JSON object")
    if data.get("schema") != SCHEMA_VERSION:
        return None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestMalformed(f"{path}: manifest malformed: {_first_problem(exc)}") from None


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest as a plain mapping, or ``None`` when missing, unreadable or malformed (the stage redoes it)."""
    try:
        manifest = load_manifest(path)
    except ManifestMalformed:
        return None
    return None if manifest is None else manifest.model_dump(by_alias=True, mode="json")


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def is_current(path: Path, key: dict[str, Any]) -> bool:
    """True when the manifest at ``path`` has this key and all its outputs are intact."""
    try:
        manifest = load_manifest(path)
    except ManifestMalformed as exc:
        print(f"note: {exc}; redoing the work")
        return False
    if manifest is None or manifest.key != key:
        return False
    base = path.parent
    for name, recorded in manifest.outputs.items():
        output = Path(name) if Path(name).is_absolute() else base / name
        if not output.is_file() or output.stat().st_size != recorded.bytes:
            return False
        if cached_sha256(output, base) != recorded.sha256:
            return False
    return True


def write_manifest(path: Path, stage: str, key: dict[str, Any], outputs: list[Path],
                   counts: dict[str, Any], digests: dict[Path, str] | None = None,
                   token_policy: TokenPolicy | None = None) -> dict[str, Any]:
    """Record a finished stage; written last and atomically, so it never vouches for partial work.
    ``digests``: sha256 of outputs their writer hashed while writing them (not read again)."""
    base = path.parent
    known = digests or {}
    for out, digest in known.items():
        remember_sha256(out, digest, base)
    manifest: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "stage": stage,
        "key": key,
        "outputs": {
            _relative(out, base): {"sha256": known.get(out) or cached_sha256(out, base), "bytes": out.stat().st_size}
            for out in outputs
        },
        "counts": counts,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if token_policy is not None:
        manifest["token_policy"] = token_policy.model_dump()
    Manifest.model_validate(manifest)  # what is written must read back
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest
