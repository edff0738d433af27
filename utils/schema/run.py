"""What a result ran: the fairness keys, the training config, the model's shape, the settings the framework
resolved, the profile's changes, and the fingerprints that prove two runs trained on the same inputs."""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model, model_validator

from utils.schema.block import Block, Count, NonNegative, Positive, Scalar
from utils.spec.models import ModelShape


class Workload(Block):
    """Every fairness key in ``config.env`` spelling (``utils.config.model.WORKLOAD_KEYS``).

    A key the producer could not know (a foreign log that never states SL) is ``None`` with the reason in ``unknown``.
    """

    DATASET: str | None = None
    DATA_SAMPLES: Positive | None = None
    MODEL_SIZE: str | None = None
    SEED: Count | None = None
    MBS: Positive | None = None
    GBS: Positive | None = None
    SL: Positive | None = None
    LR: NonNegative | None = None
    MIN_LR: NonNegative | None = None
    LR_DECAY: str | None = None
    WARMUP_STEPS: Count | None = None
    TRAIN_ITERS: Positive | None = None
    WEIGHT_DECAY: NonNegative | None = None
    BETA1: NonNegative | None = None
    BETA2: NonNegative | None = None
    GRAD_CLIP: NonNegative | None = None
    INIT_STD: NonNegative | None = None
    TP: Positive | None = None
    PP: Positive | None = None
    CP: Positive | None = None
    DP: Positive | None = None
    GA: Positive | None = None
    PRECISION: str | None = None
    FP8: bool | None = None
    WORLD_SIZE: Positive | None = None
    unknown: dict[str, str] = Field(default_factory=dict)
    NULL_REASONS: ClassVar = {"*": "unknown"}



class TrainingConfig(Block):
    """What the run trained with.

    ``precision_effective`` is the configuration's precision label, the same for every framework so fairness can
    compare it; ``precision_detail`` says how the framework realises it, in its own words. On cpu the precision that
    ran may differ from PRECISION (CPU_PRECISION): ``precision_requested`` is PRECISION and ``precision_reason`` says
    why. ``workload`` is the one record of the fairness keys; the five top-level names are the older tools' spelling
    of five of them, checked equal here.
    """

    max_steps: Positive | None
    global_batch_size: Positive | None
    micro_batch_size: Positive | None
    sequence_length: Positive | None
    num_gpus: Positive | None
    workload: Workload
    nnodes: Positive | None = None
    gpus_per_node: Positive | None = None
    precision_effective: str | None = None
    precision_detail: str | None = None
    # cpu only (utils/machine/cpu_precision.py): PRECISION as configured, and why precision_effective is what ran
    precision_requested: str | None = None
    precision_reason: str | None = None
    world_size_started: Positive | None = None
    # MODEL_LAYERS: the depth of a labelled proxy (model_shape.proxy_of_layers is the model's own); None: every layer
    model_layers: Positive | None = None
    # TRAN_COMPILE: whether tran compiled its decoder layers, and the compile time kept out of the measured steps
    compiled: bool | None = None
    compile_time_seconds: NonNegative | None = None

    @model_validator(mode="after")
    def _aliases_match_workload(self) -> TrainingConfig:
        pairs = {"max_steps": "TRAIN_ITERS", "global_batch_size": "GBS", "micro_batch_size": "MBS",
                 "sequence_length": "SL", "num_gpus": "WORLD_SIZE"}
        for alias, key in pairs.items():
            if getattr(self, alias) != getattr(self.workload, key):
                raise ValueError(f"training_config.{alias}={getattr(self, alias)} but workload.{key}="
                                 f"{getattr(self.workload, key)}: they must be equal")
        return self


def _bounded(hint: Any) -> Any:
    """A ``ModelShape`` field's type as a result stores it: counts positive, figures non-negative, both bounded. A
    result is foreign input (the module docstring), so its shape gets the bounds every block has; ``rope_scaling``'s
    values are scalars like every other free-form mapping of a result."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, (_bounded(arg) for arg in typing.get_args(hint)))
    return {int: Positive, float: NonNegative, dict[str, Any]: dict[str, Scalar]}.get(hint, hint)


def _shape_fields() -> dict[str, Any]:
    hints = typing.get_type_hints(ModelShape)
    return {f.name: (_bounded(hints[f.name]), ... if f.default is dataclasses.MISSING else f.default)
            for f in dataclasses.fields(ModelShape)}


# The architecture that ran: ModelShape's fields, in its order, with a result's bounds (the block is
# derived, so a field added to the table is a field of the result; regenerate utils/schema/schema.json).
ModelShapeBlock = create_model(
    "ModelShapeBlock", __base__=Block, __module__=__name__,
    __doc__="The architecture that ran (``utils.spec.models.ModelShape.as_dict()``).", **_shape_fields(),
)


class EffectiveSettings(Block):
    """What the framework itself resolved before the run (train/ preflight): one flat record.

    ``settings``: tprimat's names for the fairness table's settings and the framework knobs around them; ``env``: what
    the vendor launcher exports; ``resolved_by``: the code that resolved them, else ``reason``.
    """

    settings: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    resolved_by: str | None = None
    reason: str | None = None


class ProfileSetting(Block):
    """One setting a tuned profile runs at another value than the identical profile, and who says so."""

    key: str
    identical: Scalar
    tuned: Scalar
    source: str


class ProfileSettings(Block):
    """What the profile changed (``train/profiles/`` produces it; ``Result.profile`` names the profile that ran).

    ``requested`` is PROFILE. Under tuned, ``recipe`` names the vendor recipe, ``settings`` every setting it runs at
    another value than the identical profile, each with its source, ``env`` the variables it exports; ``borrowed_from``
    the model whose recipe was applied; ``fallback`` why identical ran although tuned was requested.
    """

    requested: Literal["identical", "tuned", "mlperf"]
    recipe: str | None = None
    title: str | None = None
    borrowed_from: str | None = None
    fallback: str | None = None
    settings: list[ProfileSetting] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------------------
# fingerprints


class HashedFiles(Block):
    """A hash over files (dataset pair or tokenizer), or why there is none."""

    hash: str | None = None
    path: str | None = None
    files: list[str] | None = None
    bytes: Count | None = None
    reason: str | None = None


class CodeRevision(Block):
    commit: str | None = None
    dirty: bool | None = None
    reason: str | None = None


class Fingerprint(Block):
    """Hashes that prove two results trained on the same config, data, tokenizer and model."""

    config: str | None = None
    model_shape: str | None = None
    data: HashedFiles = Field(default_factory=HashedFiles)
    # the held-out validation pair (issue 34), when the run evaluated; None: evaluation off
    valid_data: HashedFiles | None = None
    tokenizer: HashedFiles = Field(default_factory=HashedFiles)
    flop_convention: str | None = None
    code: CodeRevision = Field(default_factory=CodeRevision)
