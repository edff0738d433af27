"""No import circles among the project's modules (docs/ARCHITECTURE.md, "Rooms").

The graph is built with ``ast`` over utils, data, train, evaluate and bench, every import counted, the
function-local ones included: a lazy import still ties two modules together (a change to one can break
the other, and neither can be read alone). A cycle fails the test with its modules named.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import REPO
from tests.house.test_import_direction import from_module, imported_modules

PACKAGES = ("utils", "data", "train", "evaluate", "bench")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path) -> list[str]:
    """Every module ``path`` imports, anywhere in the file, plus ``pkg.name`` for each ``from pkg import name``."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = [module for _line, module in imported_modules(path, root)]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            module = from_module(node, package)
            found.extend(f"{module}.{alias.name}" for alias in node.names)
    return found


def import_graph(root: Path = REPO, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports.

    Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``, so those count too,
    except the importing module's own enclosing packages (already being imported when it runs).
    """
    files = {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        for target in imported_names(path, root):
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                if candidate in files and candidate != name and not name.startswith(candidate + "."):
                    edges.add(candidate)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


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
