"""Where a file tprimat writes goes: inside its folder, under a name built from safe parts, or nowhere.

Why one helper: a result's field (``y/../../tmp/X``, a line break) must never steer a written file outside its folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from utils.io.sanitise import one_line

_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
_UNSAFE = re.compile(r"(?:[^A-Za-z0-9._-]|\.{2,})+")


LOCK_DIR = ".tprimat"  # tprimat's bookkeeping folder in DATA_DIR and OUTPUT_DIR


class OutputPathError(ValueError):
    """An output path would leave its folder or holds a character no output name has; one line."""


def safe_label(text: str, fallback: str = "x") -> str:
    """``text`` as a file-name part: runs of other characters (and of dots) become ``_``; no leading dot."""
    label = _UNSAFE.sub("_", text).lstrip(".")
    return label or fallback


def output_file(folder: Path, name: str | Path) -> Path:
    """``folder / name``, refused unless ``name`` is relative, made of safe parts, and stays inside ``folder``."""
    folder = Path(folder)
    parts = Path(name).parts if str(name) else ()
    if not parts or Path(name).is_absolute():
        raise OutputPathError(f"refusing the output name '{one_line(name)}': not a relative file name")
    for part in parts:
        if not _PART.fullmatch(part):
            raise OutputPathError(f"refusing the output name '{one_line(name)}' in {one_line(folder, 300)}: "
                                  f"'{one_line(part, 60)}' is not a plain file name ([A-Za-z0-9._+-], no leading dot)")
    target = folder.joinpath(*parts)
    real_folder = os.path.realpath(folder)
    real_target = os.path.realpath(target)
    if os.path.commonpath([real_folder, real_target]) != real_folder or real_target == real_folder:
        raise OutputPathError(f"refusing {one_line(target, 300)}: it leads outside {one_line(folder, 300)} "
                              f"({one_line(real_target, 300)})")
    return target
