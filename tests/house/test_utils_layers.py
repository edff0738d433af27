"""utils/ is built in layers, and no import runs back up (issue 47 item 2; docs/ARCHITECTURE.md).

From the bottom: ``io`` (files read and written safely; imports nothing of the project), ``spec`` (the registry and
the models' shapes), ``schema`` (the result's typed model), then ``config`` -> ``machine`` -> ``measure`` ->
``result``, and on top ``files`` (what reads the config to act on folders: purge, wrap, locks, disk, run owner) and
``dataset``. A package imports only packages of lower layers; two packages of one layer never import each other.
The graph is tests/helpers/imports.py's, read with ``ast``: every import counts, the function-local ones included.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import import_graph
from tests.helpers.paths import REPO

LAYERS: tuple[tuple[str, ...], ...] = (
    ("io",),
    ("spec",),
    ("schema",),
    ("config",),
    ("machine",),
    ("measure",),
    ("result",),
    ("files", "dataset"),
)
# utils/__init__.py runs before any module of utils: it may import the bottom layer only.
ROOT_MAY_IMPORT = ("io",)


def _package(module: str) -> str | None:
    """The package of utils a module belongs to (``utils.io.atomic`` -> ``io``); None for utils/__init__.py."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def back_arrows(root: Path = REPO) -> list[str]:
    """``a -> b`` for every import of a module of utils that is not strictly below the importing module's layer."""
    layer = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}
    out = []
    for module, targets in sorted(import_graph(root, ("utils",)).items()):
        source = _package(module)
        for target in sorted(targets):
            into = _package(target)
            if into is None or into == source:
                continue
            allowed = into in ROOT_MAY_IMPORT if source is None else layer[into] < layer[source]
            if not allowed:
                out.append(f"{module} -> {target}")
    return out


def test_every_package_of_utils_has_a_layer() -> None:
    packages = {p.parent.name for p in (REPO / "utils").glob("*/__init__.py")}
    assert packages == {package for packages in LAYERS for package in packages}


def test_no_import_runs_back_up_in_utils() -> None:
    found = back_arrows()
    assert not found, "imports against utils/'s layers (function-local ones counted):\n" + "\n".join(found)


def test_the_check_sees_a_function_local_back_arrow_and_a_sibling(tmp_path: Path) -> None:
    for package in ("io", "config", "files", "dataset"):
        (tmp_path / "utils" / package).mkdir(parents=True)
        (tmp_path / "utils" / package / "__init__.py").write_text("")
    (tmp_path / "utils" / "__init__.py").write_text("from utils.io import a\n")
    (tmp_path / "utils" / "io" / "a.py").write_text("def f():\n    from utils.config import b\n")
    (tmp_path / "utils" / "config" / "b.py").write_text("from utils.io import a\n")
    (tmp_path / "utils" / "files" / "c.py").write_text("from utils.dataset import d\nfrom ..config import b\n")
    (tmp_path / "utils" / "dataset" / "d.py").write_text("")
    assert back_arrows(tmp_path) == ["utils.files.c -> utils.dataset", "utils.files.c -> utils.dataset.d",
                                     "utils.io.a -> utils.config", "utils.io.a -> utils.config.b"]
