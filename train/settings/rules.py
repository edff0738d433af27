"""The rules as data: tprimat's fairness and gate rules, one row each, in one versioned table (``rules.json``).

A rule written once is checked, explained and documented from the same row, as mlcommons/logging keeps its
compliance rules: the preflight (``train/settings/expected.py``), the gate's thresholds, the page's explanations
(``WHY``) and docs/CONFORMANCE.md's table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from train.rules.init_std import megatron_init_stds
from train.rules.schedule import lr_at
from utils.config.model import Config
from utils.spec.models import ModelShape

TABLE = json.loads(Path(__file__).with_name("rules.json").read_text(encoding="utf-8"))
VERSION: int = TABLE["version"]
SOURCES: dict[str, str] = TABLE["sources"]
HOW: dict[str, str] = TABLE["how"]
WHY: dict[str, str] = TABLE["why"]
NOT_LOCAL = object()  # a rule MEGATRON_IMPL=local does not change


class Job(NamedTuple):
    """What a setting's expected value is computed from (``padded_vocab``: Megatron's padded vocabulary)."""

    cfg: Config
    platform: str
    shape: ModelShape
    padded_vocab: int


DERIVED: dict[str, Callable[[Job], Any]] = {
    "scaled init std": lambda j: megatron_init_stds(j.cfg.init_std, j.shape.num_layers).scaled_std,
    "lr at step 1": lambda j: lr_at(0, j.cfg),
    "lr at step 2": lambda j: lr_at(min(1, j.cfg.train_iters - 1), j.cfg),
    "lr at the last step": lambda j: lr_at(j.cfg.train_iters - 1, j.cfg),
    "TP > 1": lambda j: j.cfg.tp > 1,
    "hybrid under FP8": lambda j: "hybrid" if j.cfg.fp8 else None,
    "padded vocabulary": lambda j: j.padded_vocab,
    "rope_theta as a float": lambda j: float(j.shape.rope_theta),
    "rope_scaling factor": lambda j: float(j.shape.rope_scaling["factor"]) if j.shape.rope_scaling else None,
    "not tied_embeddings": lambda j: not j.shape.tied_embeddings,
}


@dataclass(frozen=True)
class Rule:
    key: str
    source: str
    ref: Any = None
    how: str = "equal"
    exempt: Mapping[str, str] = field(default_factory=dict)
    why: str = "configuration"
    note: str = ""
    local: Any = NOT_LOCAL

    def expected(self, job: Job) -> Any:
        """The value a vendor job must run (a setting rule of any source but MEGATRON_IMPL)."""
        if self.source == "config.env":
            return getattr(job.cfg, self.ref)
        if self.source == "model shape":
            return getattr(job.shape, self.ref)
        if self.source == "derived":
            return DERIVED[self.ref](job)
        return self.ref[job.platform] if self.source == "per platform" else self.ref


SETTINGS: tuple[Rule, ...] = tuple(Rule(**row) for row in TABLE["settings"])  # in the preflight's order
GATE: tuple[Rule, ...] = tuple(Rule(**row) for row in TABLE["gate"])
RULES: dict[str, Rule] = {rule.key: rule for rule in (*SETTINGS, *GATE)}
