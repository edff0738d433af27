"""Small JSON manifests that make every data stage idempotent.

A manifest records the *key* of a stage run (everything that determines its output:
parameters, input hashes, tool versions) and the sha256 of each output. A stage is
skipped only when the key is unchanged and every output still has its recorded
hash, so an edited input, a new library version or a truncated output all redo
the work. Paths are stored relative to the manifest's folder so a ``DATA_DIR``
mounted elsewhere (``/data/tprimat`` in a container) stays valid. Output hashes are cached
by file identity in the manifest's folder (``utils/hash_cache.py``), so checking that a
multi-gigabyte output is unchanged costs a ``stat``, not a re-hash.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from utils.atomic import atomic_path
from utils.hash_cache import cached_sha256

SCHEMA_VERSION = 1


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest, or ``None`` when missing or unreadable (then the stage just redoes its work)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA_VERSION else None


def is_current(path: Path, key: dict[str, Any]) -> bool:
    """True when the manifest at ``path`` has this key and all its outputs are intact."""
    manifest = read_manifest(path)
    if manifest is None or manifest.get("key") != key:
        return False
    base = path.parent
    for name, recorded in manifest.get("outputs", {}).items():
        output = Path(name) if Path(name).is_absolute() else base / name
        if not output.is_file() or output.stat().st_size != recorded.get("bytes"):
            return False
        if cached_sha256(output, base) != recorded.get("sha256"):
            return False
    return True


def write_manifest(path: Path, stage: str, key: dict[str, Any], outputs: list[Path],
                   counts: dict[str, Any]) -> dict[str, Any]:
    """Record a finished stage; written last and atomically, so it never vouches for partial work."""
    base = path.parent
    manifest = {
        "schema": SCHEMA_VERSION,
        "stage": stage,
        "key": key,
        "outputs": {
            _relative(out, base): {"sha256": cached_sha256(out, base), "bytes": out.stat().st_size} for out in outputs
        },
        "counts": counts,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest

