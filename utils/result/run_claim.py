"""Which run owns a job's result file: the record ``utils.result.file.write_result`` asks before every write.

Its own module so that it sits below both ``utils/result/file.py`` and ``utils/files/run_owner.py`` with no import
circle. The owner (``TPRIMAT_RUN_ID``) is a small file beside the result lock, written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from utils.io.atomic import atomic_write_text
from utils.io.output_path import LOCK_DIR

RUN_ID_ENV = "TPRIMAT_RUN_ID"
CLOSED_PREFIX = "closed:"


def owner_path(result_path: Path) -> Path:
    return Path(result_path).parent / LOCK_DIR / f"{Path(result_path).name}.run"


def current_owner(result_path: Path) -> str | None:
    try:
        return owner_path(result_path).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def claim(result_path: Path, owner: str) -> None:
    atomic_write_text(owner_path(result_path), owner + "\n")


def write_problem(result_path: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """Why this process must not write ``result_path`` (its run no longer owns it), or None. A process outside any run
    (no ``TPRIMAT_RUN_ID``: a launcher started by hand, a test, log extraction) and a file no run has claimed are
    written as before."""
    run_id = (os.environ if environ is None else environ).get(RUN_ID_ENV)
    owner = current_owner(result_path) if run_id else None
    if not run_id or owner is None or owner == run_id:
        return None
    state = "has ended" if owner == CLOSED_PREFIX + run_id else "was replaced by a newer run"
    return f"run {run_id[:8]} {state}; its write of {Path(result_path).name} is dropped"
