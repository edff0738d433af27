"""The shape of a vendor recipe as data: every value with the file and version it was read from.

A tuned run is only worth its name if each setting traces to what the vendor published: each value sits beside its
:class:`Source`, ``--dry-run`` prints them, the result records those that differ from identical. Keys are the
preflight's flat names; the workload keys (sequence length, batch sizes, parallel sizes) become config values,
every other key is a framework setting that :mod:`train.profiles.frameworks` spells per framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Recipe keys that are config.env workload keys: recipe key -> Config field.
WORKLOAD_FIELDS: dict[str, str] = {
    "seq_length": "sl",
    "micro_batch_size": "mbs",
    "global_batch_size": "gbs",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "context_parallel_size": "cp",
}
# The same keys in config.env spelling, as results and reports name them.
WORKLOAD_NAMES: dict[str, str] = {
    "seq_length": "SL", "micro_batch_size": "MBS", "global_batch_size": "GBS",
    "tensor_model_parallel_size": "TP", "pipeline_model_parallel_size": "PP", "context_parallel_size": "CP",
}


@dataclass(frozen=True)
class Source:
    """Where a value was read: repository, path, version (tag or commit) and the place in the file."""

    repository: str
    path: str
    version: str
    where: str = ""

    def cite(self) -> str:
        place = f" ({self.where})" if self.where else ""
        return f"{self.repository} {self.version}: {self.path}{place}"


@dataclass(frozen=True)
class Setting:
    """One value of a recipe; ``frameworks`` and ``fp8`` (True, False, None: both) limit where it applies."""

    key: str
    value: Any
    source: Source
    frameworks: tuple[str, ...] = ()
    fp8: bool | None = None
    note: str = ""

    def applies(self, framework: str, fp8: bool) -> bool:
        return (not self.frameworks or framework in self.frameworks) and (self.fp8 is None or self.fp8 == fp8)


def delayed_fp8(option: Source, scaling: Source, param_gather: bool) -> tuple[Setting, ...]:
    """FP8 as both vendors' recipes set it for Megatron: the ``hybrid`` format with Transformer Engine's delayed
    scaling over a 1024-step amax history (its max), for FP8 runs only. ``option`` is where the vendor names the
    format, ``scaling`` where it sets the rest; the FP8 parameter all-gather is the one value they differ in."""
    return (
        Setting("fp8", "hybrid", option, fp8=True),
        Setting("fp8_recipe", "delayed", scaling, fp8=True),
        Setting("fp8_amax_history_len", 1024, scaling, fp8=True),
        Setting("fp8_amax_compute_algo", "max", scaling, fp8=True),
        Setting("fp8_param_gather", param_gather, scaling, fp8=True),
    )


@dataclass(frozen=True)
class NotTaken:
    """A value the vendor's file sets that tuned does not run, and why (architecture, algorithm, logging...)."""

    key: str
    value: Any
    source: Source
    reason: str


@dataclass(frozen=True)
class Recipe:
    """One vendor's published performance recipe for one model, for the frameworks that run it. ``gpus`` is the GPU
    count the recipe was published for; ``env`` the environment variables."""

    id: str
    platform: str
    title: str
    frameworks: tuple[str, ...]
    gpus: int
    precisions: tuple[str, ...]
    settings: tuple[Setting, ...]
    env: tuple[Setting, ...] = ()
    not_taken: tuple[NotTaken, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Borrowed:
    """A model the vendor publishes no recipe for runs another model's recipe, said so with the reason."""

    recipe: Recipe
    from_model: str
    reason: str


@dataclass(frozen=True)
class VendorTable:
    """Every recipe of one platform, by model; ``searched`` names where a missing model was looked for."""

    platform: str
    recipes: dict[str, Recipe | Borrowed] = field(default_factory=dict)
    searched: tuple[str, ...] = ()

    def lookup(self, model: str) -> tuple[Recipe, Borrowed | None] | None:
        entry = self.recipes.get(model)
        if entry is None:
            return None
        if isinstance(entry, Borrowed):
            return entry.recipe, entry
        return entry, None
