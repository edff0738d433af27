"""docs/ARCHITECTURE.md stays true to the tree: every file it names exists, and its folder tree is today's.

The document is where a reader learns which file to touch ("Where to add ..."); a path that was moved or renamed
would send them to nothing, and so would a bare ``launcher.py`` that no longer exists or a ``plugin.py`` that
could be any of five. So:

- every path from a top-level folder it names exists (placeholders such as ``<platform>`` and ``*`` skipped);
- every ``name.py`` it names exists somewhere in the tree and is one file, or is qualified until it is
  (``launch/preflight.py``, not ``preflight.py``): the code outside tests/ is looked at first;
- its folder tree is what ``python -m tests.helpers.architecture_tree --write`` writes from the packages'
  docstrings today;
- it states the command that counts the house's Python lines.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.architecture_tree import END, START, render, summary, tree_rows, with_tree
from tests.helpers.paths import REPO
from tests.helpers.references import Tree, missing_references, python_names, repo_paths

DOC = REPO / "docs" / "ARCHITECTURE.md"
LINE_COUNT = "git ls-files '*.py' | grep -v '^tests/' | xargs cat | wc -l"


def _prose(text: str) -> str:
    """The document without its generated tree (whose module names stand under their package, by construction)."""
    return text[: text.index(START)] + text[text.index(END) + len(END):]


def test_every_path_architecture_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(repo_paths(text)) > 50, "the document names the files of every room"
    assert missing_references(text, Tree.of()) == [], "docs/ARCHITECTURE.md names what the tree lacks"


def test_every_file_name_architecture_names_is_one_file_of_the_tree() -> None:
    problems = python_names(_prose(DOC.read_text(encoding="utf-8")), Tree.of())
    assert problems == [], f"docs/ARCHITECTURE.md names files that are none, or several (qualify them): {problems}"


def test_the_folder_tree_is_generated_from_todays_docstrings() -> None:
    document = DOC.read_text(encoding="utf-8")
    assert with_tree(document, render()) == document, (
        "docs/ARCHITECTURE.md's tree is stale: python -m tests.helpers.architecture_tree --write")


def test_the_document_says_how_to_count_the_house() -> None:
    assert LINE_COUNT in DOC.read_text(encoding="utf-8")


def test_the_checks_see_a_moved_file_a_bare_name_and_an_ambiguous_one(tmp_path: Path) -> None:
    for path in ("train/launch/launcher.py", "train/mega/plugin.py", "train/tran/plugin.py", "tests/helpers/x.py",
                 "train/launch/preflight.py", "tests/helpers/preflight.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    tree = Tree.of(tmp_path)
    text = ("`train/launch/launcher.py`, `train/old_module.py`. See train/launch/. "
            "`train/train_<platform>_<framework>_<model>.sh`, `<OUTPUT_DIR>/logs/x`, data/{a,b}")
    assert repo_paths(text) == ["train/launch/", "train/launch/launcher.py", "train/old_module.py"]
    assert missing_references(text, tree) == ["train/old_module.py"]
    named = "`launcher.py`, `launch.py`, `plugin.py`, `mega/plugin.py`, `x.py`, `preflight.py`, `__init__.py`"
    assert python_names(named, tree) == [
        "launch.py (no such file)", "plugin.py (which one? train/mega/plugin.py, train/tran/plugin.py)"]


def test_the_tree_lists_a_silent_package_by_its_modules(tmp_path: Path) -> None:
    for room in ("utils", "data", "train", "evaluate", "bench"):
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text(f'"""The {room} room. More words."""\n')
    (tmp_path / "utils" / "quiet").mkdir()
    (tmp_path / "utils" / "quiet" / "__init__.py").write_text("")
    (tmp_path / "utils" / "quiet" / "a.py").write_text('"""What a does, said in one sentence. Then more."""\n')
    (tmp_path / "shell").mkdir()
    (tmp_path / "shell" / "go.sh").write_text("#!/usr/bin/env bash\n# Run it. Twice.\nexit 0\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "X.md").write_text("# The X document\n")
    rows = tree_rows(tmp_path)
    assert ("utils/", "The utils room.") in rows and ("  quiet/", "") in rows
    assert ("    a.py", "What a does, said in one sentence.") in rows
    assert ("  go.sh", "Run it.") in rows and ("  X.md", "The X document") in rows
    assert summary("word " * 40).endswith("...") and len(summary("word " * 40)) <= 110
