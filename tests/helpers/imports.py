"""The project's import graph, read with ``ast``: what each module imports, wherever the import sits.

Every ``import`` and ``from ... import`` counts, the function-local ones included: a lazy import still
ties two modules together (a change to one can break the other, and neither can be read alone). The
house tests use it for the direction of imports (tests/house/test_import_direction.py) and for cycles
(tests/house/test_import_cycles.py); tests/unit/train/launch/test_plugin_contract.py for what the
plugin contract may import.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import REPO

PACKAGES = ("utils", "data", "train", "evaluate", "bench")


def from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from X import ...`` in ``package`` (a relative one resolved against it)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


# Where statements nest (an import is a statement, so expressions need no visit): the bodies of
# functions, classes, if/for/while/with/try/match and their else, finally, except and case parts.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def import_nodes(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``path``, wherever it sits (function-local, under ``if``, in ``try``)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
            continue
        for field in _BODIES:
            children = getattr(node, field, None)
            if isinstance(children, list):
                stack.extend(child for child in children if isinstance(child, ast.AST))
    return found


def _package(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts[:-1])


def imported_modules(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, wherever it sits in the file."""
    package = _package(path, root)
    found: list[tuple[int, str]] = []
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        else:
            found.append((node.lineno, from_module(node, package)))
    return sorted(found)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path) -> list[str]:
    """Every module ``path`` imports, anywhere in the file, plus ``pkg.name`` for each ``from pkg import name``."""
    package = _package(path, root)
    found: list[str] = []
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        else:
            module = from_module(node, package)
            found.append(module)
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
