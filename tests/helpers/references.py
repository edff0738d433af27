"""Which files a text names, and which of them the repository lacks: the one reader of file references.

Why: a doc, a comment or a docstring that names a moved, renamed or never committed file sends its reader to
nothing (issue 47 found a diagram naming four files that no longer existed and two modules citing a design
document kept outside the repository). So every reference is checked against the tree:

- a path from a top-level folder (``train/launch/launcher.py``, ``utils/schema/``; ``data/encode`` and
  ``utils/result/file.read_result`` name the module ``.py``);
- a ``python -m`` module of the project's packages;
- a documentation file named in capitals (``SAMPLE_ORDER.md``), which must exist somewhere in the tree;
- a bare or partly qualified Python file name (``launcher.py``, ``launch/launcher.py``), for the documents
  that name files so (docs/ARCHITECTURE.md): it must exist, and name one file only;
- and, always a fault, a folder outside the repository that holds project notes, or a section of a design
  document that is not in it.

Placeholders (``<platform>``, ``*``, ``{a,b}``) are no files; a path right after a colon names another
repository's file (``pytorch/torchtitan:tests/assets/losses``), never one of this one.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.paths import REPO

TOP = ("utils", "data", "train", "evaluate", "bench", "shell", "tests", "docs")
PATH = re.compile(r"(?<![\w./<$:@-])((?:" + "|".join(TOP) + r")/[\w./-]*)")
MODULE = re.compile(r"\bpython3? -m ((?:" + "|".join(TOP) + r")(?:\.\w+)+)")
DOC_NAME = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_]*\.md)\b")
PY_NAME = re.compile(r"(?<![\w./<$:@-])((?:[\w-]+/)*\w+\.py)\b")
OUTSIDE = re.compile(r"(?:/work/(?:shared|notes)|\.\./shared)(?:/[\w.-]+)*")
DESIGN_SECTION = re.compile(r"\bDESIGN(?:\.md)?,?\s*(?:§\s*[\d.]+|sections?\b(?:\s+[\d.]*\d)?)")
PLACEHOLDER_NEXT = "<*{"
GENERIC = {"__init__.py", "__main__.py"}  # every package has one: the sentence says which
# what follows a module path's last dot when it names a file, not an attribute
EXTENSIONS = {"py", "sh", "md", "json", "jsonl", "txt", "toml", "env", "log", "yaml", "yml", "sbatch", "png", "html",
              "bin", "idx", "sqlite", "zip", "cfg", "so", "csv", "tsv", "pyc", "whl", "mllog", "svg", "example"}
# folders that are no part of the tree: generated, cached or ignored by git (the top-level ones only at the top)
SKIPPED_DIRS = {"__pycache__", "node_modules"}
SKIPPED_TOP = {"output", "data_cache", "history"}
# files whose text is a recording of past output, not a statement about the tree
RECORDINGS = ("tests/golden/out/",)
CODE_SUFFIXES = {".sh", ".sbatch", ".env", ".toml", ".txt", ".example", ".Dockerfile"}


@dataclass(frozen=True)
class Tree:
    """The repository's files and folders, as paths relative to its root."""

    files: frozenset[str]
    folders: frozenset[str]
    root: Path = REPO

    @classmethod
    def of(cls, root: Path = REPO) -> Tree:
        files, folders = set(), set()
        for here, dirs, names in os.walk(root):
            rel = Path(here).relative_to(root).as_posix()
            dirs[:] = [d for d in dirs if (d == ".ci" or not d.startswith(".")) and d not in SKIPPED_DIRS
                       and not (rel == "." and d in SKIPPED_TOP)]
            prefix = "" if rel == "." else rel + "/"
            folders.update(prefix + d for d in dirs)
            files.update(prefix + n for n in names)
        return cls(frozenset(files), frozenset(folders), root)

    def has(self, path: str) -> bool:
        path = path.rstrip("/")
        return path in self.files or path in self.folders

    def ending(self, tail: str) -> list[str]:
        """Every file whose path is ``tail`` or ends with ``/tail``."""
        return sorted(f for f in self.files if f == tail or f.endswith("/" + tail))


def _resolves(tree: Tree, path: str) -> bool:
    """A repository path, or a module named by its path (``data/encode``, ``utils/result/file.read_result``)."""
    if tree.has(path) or tree.has(path + ".py"):
        return True
    folder, _, name = path.rpartition("/")
    module, *attributes = name.split(".")
    if not attributes or attributes[0] in EXTENSIONS:
        return False
    return tree.has(f"{folder}/{module}.py") or tree.has(f"{folder}/{module}")


def repo_paths(text: str) -> list[str]:
    """Every path from a top-level folder the text names, without placeholders or trailing punctuation."""
    found = []
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".-")
        end = match.end(1)
        if end < len(text) and text[end] in PLACEHOLDER_NEXT:  # train/train_<platform>_..., tests/test_*.py
            continue
        if path.rstrip("/") in TOP:
            continue
        found.append(path)
    return sorted(set(found))


def missing_references(text: str, tree: Tree) -> list[str]:
    """What the text names that the tree lacks, each as it was written (with a word on what is wrong)."""
    missing = [path for path in repo_paths(text) if not _resolves(tree, path)]
    for match in MODULE.finditer(text):
        module = match.group(1)
        path = module.replace(".", "/")
        if not (tree.has(path + ".py") or tree.has(path + "/__init__.py") or tree.has(path + "/__main__.py")):
            missing.append(f"python -m {module}")
    for match in DOC_NAME.finditer(text):
        if not tree.ending(match.group(1)):
            missing.append(match.group(1))
    missing += [f"{match.group(0)} (outside the repository)" for match in OUTSIDE.finditer(text)]
    missing += [f"{match.group(0).strip()} (a design document outside the repository)"
                for match in DESIGN_SECTION.finditer(text)]
    return sorted(set(missing))


def python_names(text: str, tree: Tree) -> list[str]:
    """Each ``name.py`` or ``folder/name.py`` the text names that names no file, or more than one.

    The code's files come first: a name that is one file outside tests/ is that file, whatever tests/ holds.
    """
    problems = []
    for match in PY_NAME.finditer(text):
        name = match.group(1)
        if name.split("/", 1)[0] in TOP and "/" in name:
            continue  # a path from the top: repo_paths checks it
        end = match.end(1)
        if end < len(text) and text[end] in PLACEHOLDER_NEXT:
            continue
        if name in GENERIC:
            continue
        everywhere = tree.ending(name)
        where = [path for path in everywhere if not path.startswith("tests/")] or everywhere  # the code's first
        if not where:
            problems.append(f"{name} (no such file)")
        elif len(where) > 1:
            problems.append(f"{name} (which one? {', '.join(where)})")
    return sorted(set(problems))


def _comment(line: str) -> str:
    """The ``#`` comment of a code line: from the first ``#`` outside a quoted string (by counting quotes)."""
    at = line.find("#")
    while at >= 0:
        before = line[:at]
        if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
            return line[at:]
        at = line.find("#", at + 1)
    return ""


def _docstrings(body: list[ast.stmt]) -> Iterator[str]:
    """The docstrings of these statements' classes and functions, and of theirs (statements only: no expressions)."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield docstring
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _docstrings([n for n in inner if isinstance(n, (ast.stmt, ast.excepthandler))])


def comments_and_docstrings(path: Path) -> str:
    """The prose of a code file: its ``#`` comments, and a Python file's docstrings."""
    text = path.read_text(encoding="utf-8", errors="replace")
    parts = [comment for comment in map(_comment, text.splitlines()) if comment]
    if path.suffix == ".py":
        try:
            module = ast.parse(text)
        except SyntaxError:
            return text
        parts += [ast.get_docstring(module, clean=False) or "", *_docstrings(module.body)]
    return "\n".join(parts)


def prose_files(tree: Tree) -> Iterator[tuple[str, str]]:
    """(path, the prose to check) of every document and code file of the tree, recordings left out."""
    for rel in sorted(tree.files):
        if rel.startswith(RECORDINGS):
            continue
        path = tree.root / rel
        name = path.name
        if path.suffix == ".md":
            yield rel, path.read_text(encoding="utf-8", errors="replace")
        elif path.suffix == ".py" or path.suffix in CODE_SUFFIXES or name.endswith("Dockerfile"):
            if rel.startswith("tests/fixtures/") and path.suffix != ".py":
                continue  # fixture data: logs, results, records of runs
            yield rel, comments_and_docstrings(path)
