"""The typed result (schema version 2): one pydantic class per block of ``train_*.json``.

Why typed: several producers build a result and every evaluator reads it, so a misspelt key or a NaN is an error where
it is made, readers use attributes, and ``utils/schema/schema.json`` is generated from ``Result`` and cannot go stale.
Each block has one producer (docs/ARCHITECTURE.md); the classes describe shapes and invariants and compute nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from utils.io.sanitise import one_line
from utils.schema.block import Block, Figure, NonNegative, Positive
from utils.schema.hardware import Environment, FrameworkVersions, GpuInfo
from utils.schema.limits import MAX_STEPS
from utils.schema.measures import MemoryEstimate, MemoryMetrics, PerformanceMetrics, PowerMetrics, Profiling, Source
from utils.schema.mlperf import Mlperf, Published
from utils.schema.quality import Evaluation, Quality
from utils.schema.run import EffectiveSettings, Fingerprint, ModelShapeBlock, ProfileSettings, TrainingConfig
from utils.spec.registry import PUBLISHED_FRAMEWORK, framework_names, model_names, platform_names

SCHEMA_VERSION = 2
# The JSON schema generated from Result (python -m utils.result.file schema --write), beside this module.
SCHEMA_PATH = Path(__file__).with_name("schema.json")

Status = Literal["ok", "incomplete", "failed"]


class Result(Block):
    """One job's result: ``output/train_<platform>_<framework>_<model>[_r<k>].json``."""

    schema_version: Literal[2] = SCHEMA_VERSION
    status: Status
    error: str | None
    warnings: list[str] = Field(default_factory=list)
    platform: str
    framework: str
    model: str
    run_index: Positive | None = None
    profile: Literal["identical", "tuned", "mlperf"] = "identical"
    profile_settings: ProfileSettings | None = None
    started_at: str | None = None
    finished_at: str | None = None
    gpu_info: GpuInfo
    environment: Environment = Field(default_factory=Environment)
    framework_versions: FrameworkVersions = Field(default_factory=FrameworkVersions)
    training_config: TrainingConfig
    model_shape: ModelShapeBlock
    effective_settings: EffectiveSettings | None = None
    fingerprint: Fingerprint | None = None
    performance_metrics: PerformanceMetrics | None = None
    memory_metrics: MemoryMetrics | None = None
    memory_estimate: MemoryEstimate | None = None
    power_metrics: PowerMetrics | None = None
    # Array entry i is iteration ``first_step + i * step_interval``. A log that starts later (a resumed
    # or rotated fragment) has first_step > 1; a framework that logged every k-th iteration has
    # step_interval k, and each entry is then what it printed for that interval.
    first_step: Positive = 1
    step_interval: Positive = 1
    step_times: list[NonNegative | None] = Field(default_factory=list, max_length=MAX_STEPS)
    loss_values: list[Figure | None] = Field(default_factory=list, max_length=MAX_STEPS)
    learning_rates: list[NonNegative | None] = Field(default_factory=list, max_length=MAX_STEPS)
    memory_allocated_gb: list[NonNegative | None] = Field(default_factory=list, max_length=MAX_STEPS)
    source: Source
    profiling: Profiling | None = None
    # held-out evaluations and the figures to TARGET_LOSS (issue 34); None: evaluation was off
    quality: Quality | None = None
    mlperf: Mlperf | None = None  # PROFILE=mlperf only: MLLOG and MLPerf's compliance verdict
    published: Published | None = None  # a published MLPerf run, imported (framework PUBLISHED_FRAMEWORK)

    @field_validator("platform", "framework", "model")
    @classmethod
    def _registry_name(cls, value: str, info: ValidationInfo) -> str:
        """Only the registry's names (utils/spec/registry.py): output file names and report sections are built from
        them, and a result is foreign input (a platform of ``y/../../tmp/x`` wrote outside the output folder). A
        published run's framework is ``PUBLISHED_FRAMEWORK`` (``_status_rules``: with its ``published`` block only)."""
        problem = unknown_name(info.field_name, value)
        if problem and not (info.field_name == "framework" and value == PUBLISHED_FRAMEWORK):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _status_rules(self) -> Result:
        if self.status == "ok":
            if self.error:
                raise ValueError("status ok cannot carry an error")
            if self.performance_metrics is None or self.finished_at is None:
                raise ValueError("status ok needs performance_metrics and finished_at")
        elif not self.error:
            raise ValueError(f"status {self.status} needs an error (the reason)")
        if (self.published is None) != (self.framework != PUBLISHED_FRAMEWORK):
            raise ValueError(f"framework {PUBLISHED_FRAMEWORK} is a published run's, and a published run's only")
        if self.published is not None and self.source.kind != "mlperf":
            raise ValueError("a published run's source is its MLLOG (source.kind mlperf)")
        lengths = {len(self.step_times), len(self.loss_values), len(self.learning_rates)}
        if len(lengths) > 1:
            raise ValueError("step_times, loss_values and learning_rates must have the same length")
        return self


# ---------------------------------------------------------------------------
# how large a result can be


# The per-step arrays of a result: one entry per step (or per logged interval).
PER_STEP_ARRAYS = ("step_times", "loss_values", "learning_rates", "memory_allocated_gb")
# What a result holds besides its steps (environment, settings, versions, blocks, at most 20 log problems):
# a real one has a few hundred values and containers and a few KiB; these leave ample room.
RESULT_BASE_BYTES = 64 * 1024
RESULT_BASE_VALUES = 100_000
RESULT_BASE_CONTAINERS = 20_000
# One step as write_result writes it (indent 2): an entry in each per-step array, at most 29 bytes each (the longest
# repr of a finite float, 23 characters with its sign, after a 4-space indent, with its comma and line end)...
STEP_BYTES = 29 * len(PER_STEP_ARRAYS)
# ... and, where evaluation runs every step, one evaluation: its eight members at an 8-space indent with the
# longest value each takes (counts at MAX_INT, floats at 23 characters, the reason of a non-finite loss) and its
# braces, about 350 bytes (tests/unit/result/test_result_limits.py writes the largest ones and checks they fit).
EVALUATION_BYTES = 360


def result_bytes(steps: int, evaluations: int = 0) -> int:
    """The most bytes a result of ``steps`` steps and ``evaluations`` evaluations takes as written."""
    return RESULT_BASE_BYTES + STEP_BYTES * steps + EVALUATION_BYTES * evaluations


@dataclasses.dataclass(frozen=True)
class ResultLimits:
    """What a result file may hold at most (``MAX_STEPS`` steps, an evaluation after each): bytes, JSON values and
    containers. ``read_result`` refuses a file past any of them before parsing, so a forged file costs no more
    memory than the largest result a run can write."""

    max_bytes: int
    max_values: int
    max_containers: int


RESULT_LIMITS = ResultLimits(
    max_bytes=result_bytes(MAX_STEPS, MAX_STEPS),
    max_values=RESULT_BASE_VALUES + (len(PER_STEP_ARRAYS) + 1 + len(Evaluation.model_fields)) * MAX_STEPS,
    max_containers=RESULT_BASE_CONTAINERS + MAX_STEPS,
)


_REGISTRY_NAMES = {"platform": platform_names, "framework": framework_names, "model": model_names}


def unknown_name(kind: str, value: str) -> str | None:
    """Why ``value`` is no registry name of ``kind`` (platform, framework, model), shown safely; None when it is."""
    known = _REGISTRY_NAMES[kind]()
    if value in known:
        return None
    return f"'{one_line(value, 40)}' is not a {kind} tprimat knows ({', '.join(known)})"
