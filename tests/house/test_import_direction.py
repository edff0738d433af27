"""Imports flow one way: utils <- data <- train <- evaluate (docs/ARCHITECTURE.md), and inside evaluate/
analysis <- render <- the pages and CLIs (gather and summarise never know how they are shown).

Every ``import`` and ``from ... import`` in a package is parsed with ``ast`` (tests/helpers/imports.py),
including the function-local ones, so a lazy import cannot hide a dependency the wrong way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.imports import imported_modules
from tests.helpers.paths import REPO

# package -> the project packages it must never import
FORBIDDEN = {
    "utils": ("data", "train", "evaluate", "bench", "tests"),
    "data": ("train", "evaluate", "bench", "tests"),
    "train": ("evaluate", "bench", "tests"),
}

# inside evaluate/: a room -> the only evaluate packages it may import (besides utils, data, train)
EVALUATE_ROOMS = {
    "evaluate/analysis": ("evaluate.analysis",),
    "evaluate/render": ("evaluate.analysis", "evaluate.render"),
}


def _imports(folder: str, wrong: Callable[[str], bool], root: Path) -> list[str]:
    """``path:line imports module`` for every import under ``folder`` that ``wrong`` refuses."""
    return [f"{path.relative_to(root)}:{line} imports {module}" for path in sorted((root / folder).rglob("*.py"))
            for line, module in imported_modules(path, root) if wrong(module)]


def violations(package: str, root: Path = REPO) -> list[str]:
    """Every import of ``package`` against the direction."""
    return _imports(package, lambda module: module.split(".")[0] in FORBIDDEN[package], root)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_against_the_direction(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_function_local_and_relative_imports(tmp_path: Path) -> None:
    (tmp_path / "utils" / "sub").mkdir(parents=True)
    (tmp_path / "utils" / "sub" / "probe.py").write_text(
        "import json\n\ndef f():\n    from evaluate import results\n\nfrom ...train import launch\n"
        "from .. import hashing\n", encoding="utf-8")
    assert violations("utils", root=tmp_path) == [
        "utils/sub/probe.py:4 imports evaluate",
        "utils/sub/probe.py:6 imports train",
    ]


def room_violations(room: str, root: Path = REPO) -> list[str]:
    """Every import of an evaluate package that ``room`` may not use."""
    allowed = EVALUATE_ROOMS[room]
    return _imports(room, lambda module: module.split(".")[0] == "evaluate" and not any(
        module == name or module.startswith(name + ".") for name in allowed), root)


@pytest.mark.parametrize("room", sorted(EVALUATE_ROOMS))
def test_analysis_never_imports_a_display_and_render_no_page_or_cli(room: str) -> None:
    assert room_violations(room) == []


def test_the_room_check_sees_analysis_importing_render(tmp_path: Path) -> None:
    (tmp_path / "evaluate" / "analysis").mkdir(parents=True)
    (tmp_path / "evaluate" / "analysis" / "model.py").write_text(
        "from evaluate.analysis import stats\n\ndef f():\n    from evaluate.render.rows import est\n"
        "import evaluate.compare\nfrom evaluate import report_html\n", encoding="utf-8")
    assert room_violations("evaluate/analysis", root=tmp_path) == [
        "evaluate/analysis/model.py:4 imports evaluate.render.rows",
        "evaluate/analysis/model.py:5 imports evaluate.compare",
        "evaluate/analysis/model.py:6 imports evaluate",  # ``from evaluate import x``: the room it names is hidden
    ]
