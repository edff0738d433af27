"""No import circles among the project's modules (docs/ARCHITECTURE.md, "Rooms").

The graph (tests/helpers/imports.py) is built with ``ast`` over utils, data, train, evaluate and bench,
every import counted, the function-local ones included: a lazy import still ties two modules together.
A cycle fails the test with its modules named.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import cycles, import_graph


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles (function-local imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_check_sees_a_function_local_cycle(tmp_path: Path) -> None:
    (tmp_path / "train" / "sub").mkdir(parents=True)
    (tmp_path / "train" / "__init__.py").write_text("")
    (tmp_path / "train" / "sub" / "__init__.py").write_text("")
    (tmp_path / "train" / "a.py").write_text("def f():\n    from train.sub import b\n")
    (tmp_path / "train" / "sub" / "b.py").write_text("from .. import a\n")
    (tmp_path / "train" / "c.py").write_text("import train.a\n")
    assert cycles(import_graph(tmp_path, ("train",))) == [["train.a", "train.sub.b"]]
