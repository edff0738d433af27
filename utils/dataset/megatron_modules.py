"""megatron-core's dataset modules, imported without running ``megatron/core/__init__.py`` first.

Why: tprimat's own processes use megatron-core for its datasets only (``IndexedDataset`` in data/verify.py,
``GPTDataset`` and its builder in train/rules/samples.py and train/settings/samples.py). The package's
``__init__`` imports far more: tensor parallelism, DDP, the transformer config, and with them torch's compiler
modules. On the 2-core cpu host that is 5.5 s per process after torch, against 1.8 s for the dataset modules
alone, and in a fresh ``.venv`` each of those modules is compiled once more (docs/PERFORMANCE.md, "The quick
benchmark"). The dataset modules themselves need only ``megatron.core.utils`` and ``parallel_state``.

How: the package is registered as a module object over its own folder, without executing its ``__init__``, and
the dataset modules are imported from it as usual: the very files megatron-core ships, nothing copied. The
package's ``__init__`` is not skipped for good: the first time anything asks the package for a name it does not
hold yet (``megatron.core.__version__``, ``from megatron.core import DistributedDataParallel``), or the first time
a megatron.core module outside the datasets is imported, the ``__init__`` runs in place, before that module
(:class:`_Completion`). Where a megatron-core version's modules do not import this way, every partly imported
module is dropped and the package is imported the ordinary way.
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
    """Runs the package's real ``__init__`` once, before anything else of megatron.core is imported or asked for.

    Why before: megatron.core's modules import each other in the order its ``__init__`` sets; run in the middle of
    another submodule's import (as a ``from megatron.core import tensor_parallel`` would start it), that order breaks
    into circular-import errors. So the first import of a megatron.core module outside the loaded dataset modules,
    or the first name asked of the package, runs the ``__init__`` first, as an ordinary import would have.
    """

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
