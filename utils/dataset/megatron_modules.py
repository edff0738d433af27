"""megatron-core's dataset modules, imported without running ``megatron/core/__init__.py`` first.

Why: tprimat uses megatron-core for its datasets only, and the package's ``__init__`` imports tensor parallelism,
DDP and torch's compiler with them: 5.5 s per process on the 2-core cpu host against 1.8 s for the dataset modules.
How: the package is registered as a module over its own folder without executing ``__init__``, and the shipped
dataset modules are imported from it. The first name asked of the package, or the first other megatron.core module
imported, runs the ``__init__`` in place first (:class:`_Completion`); where a version does not import this way, the
package is imported the ordinary way.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

PACKAGE = "megatron.core"
# megatron.core.utils imports parallel_state, which imports megatron.core.utils back: importing parallel_state
# first lets both finish (the package __init__ imports them in this order too).
_FIRST = "megatron.core.parallel_state"


class _Quiet:
    """Ignore megatron.core's "Transformer Engine and Apex are not installed" warnings: the datasets need neither."""

    def __enter__(self) -> None:
        self._catcher = warnings.catch_warnings()
        self._catcher.__enter__()
        warnings.filterwarnings("ignore", message="Transformer Engine and Apex are not installed")

    def __exit__(self, *exc: object) -> None:
        self._catcher.__exit__(*exc)


class _Loaded(importlib.abc.Loader):
    """The loader of a module the package's ``__init__`` has just imported: it is that module, not run again."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: Any) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        return None


class _Completion(importlib.abc.MetaPathFinder):
    """Runs the package's real ``__init__`` once, before anything else of megatron.core is imported or asked for:
    its modules import each other in the order the ``__init__`` sets, and run mid-import that order breaks."""

    def __init__(self, package: ModuleType, spec: Any) -> None:
        self.package, self.spec, self.done = package, spec, False

    def complete(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        self.package.__dict__.pop("__getattr__", None)
        with _Quiet():
            self.spec.loader.exec_module(self.package)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if self.done or not fullname.startswith(PACKAGE + ".") or fullname.startswith(PACKAGE + ".datasets"):
            return None  # the dataset package's own later imports (its helpers) need nothing more
        self.complete()
        module = sys.modules.get(fullname)
        if module is None:  # not imported by the __init__: the ordinary finders import it now
            return None
        return importlib.util.spec_from_loader(fullname, _Loaded(module), origin=getattr(module, "__file__", None),
                                               is_package=hasattr(module, "__path__"))

    def attribute(self, name: str) -> Any:
        """PEP 562 ``__getattr__`` of the package: the ``__init__`` first, then the name from it."""
        self.complete()
        try:
            return self.package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None


def _drop_partial() -> None:
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def import_dataset_modules(*names: str) -> list[ModuleType]:
    """Import ``megatron.core.datasets.<name>`` for each name, the package's ``__init__`` deferred (module doc)."""
    full = [f"{PACKAGE}.datasets.{name}" for name in names]
    with _Quiet():
        if PACKAGE not in sys.modules:
            spec = importlib.util.find_spec(PACKAGE)
            if spec is None or spec.loader is None or spec.submodule_search_locations is None:
                raise ModuleNotFoundError(f"No module named {PACKAGE!r}", name=PACKAGE)
            package = importlib.util.module_from_spec(spec)
            sys.modules[PACKAGE] = package
            sys.modules["megatron"].core = package
            try:
                importlib.import_module(_FIRST)
                modules = [importlib.import_module(name) for name in full]
            except (ImportError, AttributeError):  # another version's import order: the ordinary way
                _drop_partial()
            else:
                # installed only now: while the dataset modules import, their ``from megatron.core import
                # parallel_state`` must find the half-imported submodule, not start the whole __init__
                completion = _Completion(package, spec)
                package.__getattr__ = completion.attribute  # type: ignore[attr-defined]
                sys.meta_path.insert(0, completion)
                return modules
        return [importlib.import_module(name) for name in full]
