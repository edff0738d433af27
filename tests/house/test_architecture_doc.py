"""docs/ARCHITECTURE.md stays true to the tree: every repository file or folder it names exists.

The document is where a reader learns which file to touch ("Where to add ..."); a path that was moved
or renamed would send them to nothing. Placeholders (``<platform>``, ``*``) and output locations
(``<OUTPUT_DIR>``, ``<DATA_DIR>``) are not files of the repository and are skipped.
"""

from __future__ import annotations

import re

from tests.helpers.paths import REPO

DOC = REPO / "docs" / "ARCHITECTURE.md"
TOP = ("utils", "data", "train", "evaluate", "bench", "shell", "tests", "docs")
# a path starting at a top-level folder: train/launch/launcher.py, train/settings/, utils/schema/schema.json
PATH = re.compile(r"(?<![\w./<-])((?:" + "|".join(TOP) + r")/[\w./-]*)")


def named_paths(text: str) -> list[str]:
    """Every repository path the text names, without placeholders or trailing punctuation."""
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        end = match.end(1)
        if end < len(text) and text[end] in "<*{":  # train/train_<platform>_..., tests/test_*.py
            continue
        found.append(path)
    return sorted(set(found))


def test_every_path_architecture_names_exists() -> None:
    paths = named_paths(DOC.read_text(encoding="utf-8"))
    assert len(paths) > 50, "the document names the files of every room"
    missing = [path for path in paths if not (REPO / path).exists()]
    assert missing == [], f"docs/ARCHITECTURE.md names paths that do not exist: {missing}"


def test_the_check_sees_a_moved_file_and_skips_placeholders() -> None:
    text = ("`train/launch/launcher.py`, `train/old_module.py`. See train/settings/. "
            "`train/train_<platform>_<framework>_<model>.sh`, `<OUTPUT_DIR>/logs/x`, data/{a,b}")
    assert named_paths(text) == ["train/launch/launcher.py", "train/old_module.py", "train/settings/"]
