"""Every framework is a package behind train/launch/contract.py's Plugin, and the shared rooms know none by name.

Adding a framework is one package plus one registry row (docs/ARCHITECTURE.md, "Where to add ...") only
while the launcher, the preflight driver, the job guard, the fairness table and the LR schedule import
no framework package; the registry's plugins must then provide every function the contract names.
"""

from __future__ import annotations

import inspect

import pytest

from tests.helpers.imports import import_graph
from train.launch.context import load_plugin
from train.launch.contract import Plugin
from utils.spec.registry import FRAMEWORKS

FRAMEWORK_PACKAGES = ("train.tran", "train.deep", "train.mega", "train.prim", "train.nemo", "train.megatron")
SHARED_ROOMS = ("train.launch.launcher", "train.launch.preflight", "train.launch.job_guard", "train.launch.job_result",
                "train.launch.contract", "train.launch.context", "train.launch.jobs", "train.launch.checks",
                "train.launch.energy", "train.launch.torchrun", "train.rules.schedule",
                "train.rules.init_std", "train.rules.versions",
                "train.settings", "train.profiles", "train.logs")
CONTRACT = [name for name, _ in inspect.getmembers(Plugin, inspect.isfunction) if not name.startswith("_")]
# What a plugin declares besides its functions: its own preflight, or None for the standard one.
DECLARED = sorted(Plugin.__annotations__)


def test_the_contract_names_what_a_framework_provides() -> None:
    assert sorted(CONTRACT) == ["collect", "framework_trees", "memory", "plan", "resolve"]
    assert DECLARED == ["preflight"]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_registered_plugin_declares_its_preflight(framework: str) -> None:
    """Every registered framework is checked by the standard preflight (train/launch/preflight.py), which asks
    its resolve(); the declaration is read as an attribute, never looked up with a default."""
    plugin = load_plugin(framework)
    for name in DECLARED:
        assert hasattr(plugin, name), f"{plugin.__name__} does not declare {name}"
    assert plugin.preflight is None


def test_the_contract_imports_nothing_of_the_launcher() -> None:
    graph = import_graph()
    launcher_modules = sorted(target for target in graph["train.launch.contract"] if target.startswith("train.launch"))
    assert launcher_modules == []


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_registered_plugin_implements_the_contract(framework: str) -> None:
    plugin = load_plugin(framework)
    assert FRAMEWORKS[framework].plugin == f"train.{framework}.plugin"
    for name in CONTRACT:
        function = getattr(plugin, name, None)
        assert callable(function), f"{plugin.__name__} has no {name}()"
        wanted = [p for p in inspect.signature(getattr(Plugin, name)).parameters if p != "self"]
        assert list(inspect.signature(function).parameters) == wanted, f"{plugin.__name__}.{name}"


def test_no_shared_room_imports_a_framework_package() -> None:
    graph = import_graph()
    found = [f"{module} imports {target}" for module, targets in sorted(graph.items())
             if module.startswith(SHARED_ROOMS) for target in sorted(targets)
             if target.startswith(FRAMEWORK_PACKAGES)]
    assert found == []
