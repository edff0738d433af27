"""The typed result (schema version 2): one pydantic class per block of ``train_*.json``.

Why typed: a result is built by several producers (the ``tran`` loop, the Lightning
callback, log extraction) and read by every evaluator. With one class per block the
producers cannot drift apart (a misspelt key or a NaN is a validation error where it
is made, not a surprise in a comparison), readers use attributes instead of
``(data.get(block) or {}).get(key)``, and ``utils/schema/schema.json`` is generated
from these classes (``python -m utils.result.file schema``), so the schema cannot go stale.

Rules every block follows:

* no NaN or infinity anywhere (``allow_inf_nan=False``): a figure that could not be
  measured is ``None``, and the block says why in its ``reason`` field;
* figures that cannot be negative (times, throughput, memory, energy) are typed so;
* unknown keys are rejected (``extra="forbid"``), so a typo is caught on write;
* figures are bounded (``MAX_INT``, ``MAX_FIGURE``) and ``platform``/``framework``/``model`` are
  names of ``utils/spec/registry.py``: a result is read from other people's machines (issue 26), and
  ``utils.result.file`` validates files in pydantic's strict mode (no ``"8456"`` read as 8456);
* the older tools' keys stay where their readers look for them: top-level
  ``platform``, ``gpu_info``, ``training_config`` (``max_steps``, ``global_batch_size``,
  ``micro_batch_size``, ``sequence_length``, ``num_gpus``), ``performance_metrics``
  (``avg_step_time_seconds``, ``tokens_per_second``, ``tokens_per_second_per_gpu``,
  ``total_time_seconds``), ``step_times``, ``loss_values``, ``learning_rates``.

Each block has one producer (docs/ARCHITECTURE.md lists them); this module only
describes shapes and the invariants between fields, it computes nothing.

Why one file over 400 lines: the classes together are the schema (``utils/schema/schema.json``
is generated from ``Result`` alone), and a reader checks one block against its neighbours here.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator, model_validator

from utils.config.rules import MAX_TRAIN_ITERS
from utils.io.json_input import one_line
from utils.spec.models import ModelShape
from utils.spec.registry import PUBLISHED_FRAMEWORK, framework_names, model_names, platform_names

SCHEMA_VERSION = 2

Status = Literal["ok", "incomplete", "failed"]
# mlperf: an MLLOG read back by the MLPerf importer (issue 48): a published submission's, or a PROFILE=mlperf run's
SourceKind = Literal["callback", "log", "tensorboard", "mlperf"]
Scalar = str | int | float | bool | None

# Upper bounds of every figure (issue 26): a result is foreign input, and a figure of 10**300 passed the
# schema and then overflowed the statistics that read it. No measured quantity comes near these (a count
# is a step, a token or a byte count; 1e18 is beyond any throughput, FLOP count per token or energy in J).
MAX_INT = 2**63 - 1
MAX_FIGURE = 1e18
NonNegative = Annotated[float, Field(ge=0, le=MAX_FIGURE)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
Positive = Annotated[int, Field(ge=1, le=MAX_INT)]
Figure = Annotated[float, Field(ge=-MAX_FIGURE, le=MAX_FIGURE)]
# The most entries a per-step array (and the list of evaluations) may hold: the most steps a run may have
# (TRAIN_ITERS's bound, utils/config/rules.py). What reading a result may cost follows from it (RESULT_LIMITS below).
MAX_STEPS = MAX_TRAIN_ITERS


class Block(BaseModel):
    """Base of every block: strict keys, no non-finite numbers, assignment re-validated."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)


# ---------------------------------------------------------------------------
# hardware and software


class PeakTflops(Block):
    """Dense peak TFLOP/s of one device, per precision (``None``: not tabulated)."""

    bf16: NonNegative | None = None
    fp8: NonNegative | None = None


class GpuInfo(Block):
    """The accelerators the run used (``utils/machine/hardware.py`` produces it)."""

    device_name: str | None
    device_count: Count
    total_memory_gb: NonNegative | None
    software_stack: Literal["cuda", "rocm", "cpu"]
    software_version: str | None
    pytorch_version: str | None
    driver_version: str | None
    peak_tflops: PeakTflops = Field(default_factory=PeakTflops)
    peak_tflops_reason: str | None = None
    peak_tflops_source: str | None = None
    cpu_name: str | None = None


class ImageInfo(Block):
    tag: str | None = None
    digest: str | None = None
    in_container: bool = False


class HostTunables(Block):
    """The host settings MLPerf submitters change, as read at the start (``utils/machine/host_tunables.py``).

    Record only. ``cstates`` is CPU 0's idle states (``C6:off`` = disabled), ``cpu_governor`` every
    CPU's (with counts when they differ). None with the reason in ``unreadable``.
    """

    cpu_governor: str | None = None
    cstates: str | None = None
    cpuidle_driver: str | None = None
    numa_balancing: str | None = None
    thp_enabled: str | None = None
    thp_defrag: str | None = None
    aslr: str | None = None
    nmi_watchdog: str | None = None
    cpu_boost: str | None = None
    unreadable: dict[str, str] = Field(default_factory=dict)


class Environment(Block):
    """Performance-relevant variables and library versions (``utils/machine/environment.py``); never secrets."""

    variables: dict[str, str] = Field(default_factory=dict)
    launcher_set: dict[str, str] = Field(default_factory=dict)
    libraries: dict[str, str] = Field(default_factory=dict)
    python: str | None = None
    os: str | None = None
    hostname: str | None = None
    image: ImageInfo = Field(default_factory=ImageInfo)
    captured_by: str | None = None
    host_tunables: HostTunables | None = None


class FrameworkVersions(Block):
    """The exact framework code the run executed; ``None`` with a reason in ``unknown`` where not known."""

    megatron_lm_commit: str | None = None
    megatron_core: str | None = None
    transformer_engine: str | None = None
    primus: str | None = None
    primus_commit: str | None = None
    nemo: str | None = None
    deepspeed: str | None = None
    transformers: str | None = None
    torch: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    unknown: dict[str, str] = Field(default_factory=dict)


# ---------------------------------------------------------------------------
# what ran


class Workload(Block):
    """Every fairness key in ``config.env`` spelling (``utils.config.load.WORKLOAD_KEYS``).

    A key the producer could not know (a foreign log that never states SL, say) is
    ``None`` with the reason in ``unknown``; a tprimat launch knows all of them.
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

    @model_validator(mode="after")
    def _unknown_keys_have_reasons(self) -> Workload:
        missing = [name for name in type(self).model_fields
                   if name != "unknown" and getattr(self, name) is None and name not in self.unknown]
        if missing:
            raise ValueError(f"workload keys {', '.join(missing)} are null without a reason in 'unknown'")
        return self


class TrainingConfig(Block):
    """What the run trained with.

    ``precision_effective`` is the configuration's precision label (``bf16``, ``bf16+fp8``: the
    same for every framework, so fairness can compare it); ``precision_detail`` says how the
    framework realises it (autocast, master weights, ZeRO ...), in its own words. On the cpu platform
    the precision that ran may differ from PRECISION (CPU_PRECISION, utils/machine/cpu_precision.py):
    ``precision_requested`` is PRECISION and ``precision_reason`` says why; the workload's PRECISION and
    ``precision_effective`` are what ran, so results of different precisions never compare as fair.

    ``workload`` is the one record of the fairness keys. The five top-level names are
    the older tools' spelling of five of them, kept so their readers work; they are
    derived from ``workload`` by the producer and checked equal here.
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
    """A ``ModelShape`` field's type as a result stores it: counts positive, figures non-negative, both bounded.

    A result is foreign input (the module docstring), so its shape gets the bounds every block has;
    ``rope_scaling``'s values are scalars like every other free-form mapping of a result.
    """
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

    ``settings`` keys are tprimat's names for the fairness table's settings and the
    framework knobs around them (attention backend, fusions, gradient-reduce dtype,
    overlap flags, data-loader workers, checkpoint interval ...); ``env`` is what the
    vendor launcher exports. ``resolved_by`` names the code that resolved them, or
    ``reason`` says why they could not be resolved.
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

    ``requested`` is PROFILE. Under tuned, ``recipe`` names the vendor recipe, ``settings``
    every setting it runs at another value than the identical profile (workload keys in
    ``config.env`` spelling, framework settings in the effective-settings names, each with
    its source), ``env`` the variables the recipe exports. ``borrowed_from`` names the model
    whose recipe was applied when the vendor publishes none for this one; ``fallback`` says
    why the identical profile ran although tuned was requested (``PROFILE_FALLBACK=identical``).
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


# ---------------------------------------------------------------------------
# measurements


class StepStats(Block):
    """Summary statistics of the measured (post-warm-up) step times, seconds."""

    mean: NonNegative
    median: NonNegative
    std: NonNegative
    min: NonNegative
    max: NonNegative
    p5: NonNegative
    p95: NonNegative
    count: Positive


class FlopPair(Block):
    """One figure under both attention conventions (``full`` and ``causal``-halved)."""

    full: NonNegative | None
    causal: NonNegative | None


class FlopsPerToken(Block):
    full: NonNegative
    causal: NonNegative
    convention: dict[str, str]


class Disagreement(Block):
    """Our figure against the framework's own for one metric; flagged above ``tolerance``."""

    metric: str
    ours: NonNegative
    theirs: NonNegative
    relative_gap: NonNegative
    tolerance: NonNegative
    flagged: bool
    other_conventions: list[Disagreement] = Field(default_factory=list)


class FrameworkReported(Block):
    """The framework's own throughput figures beside ours (one shape for every framework)."""

    source: str
    median_step_time_seconds: NonNegative | None = None
    tflops_per_gpu: NonNegative | None = None
    tokens_per_second_per_gpu: NonNegative | None = None
    running_average: dict[str, NonNegative | None] = Field(default_factory=dict)
    disagreements: list[Disagreement] = Field(default_factory=list)
    flagged: bool = False

    @model_validator(mode="after")
    def _flag_is_any_disagreement(self) -> FrameworkReported:
        if self.flagged != any(d.flagged for d in self.disagreements):
            raise ValueError("framework_reported.flagged must be true exactly when a disagreement is flagged")
        return self


class PerformanceMetrics(Block):
    """Step time, throughput, FLOPs and MFU over the measured steps (``utils/measure/metrics.py``)."""

    measured_steps: Count
    skipped_steps: Count
    step_time_seconds: StepStats | None
    avg_step_time_seconds: NonNegative | None
    median_step_time_seconds: NonNegative | None
    total_time_seconds: NonNegative | None
    tokens_per_step: Positive | None
    tokens_per_second: NonNegative | None
    tokens_per_second_per_gpu: NonNegative | None
    steps_per_second: NonNegative | None
    flops_per_token: FlopsPerToken | None
    tflops_per_gpu: FlopPair | None
    peak_tflops: NonNegative | None
    peak_precision: str
    mfu: FlopPair | None
    mfu_reason: str | None
    throughput_basis: str
    total_time_basis: str = "sum of every recorded step time, warm-up included"
    framework_reported: FrameworkReported | None = None

    @model_validator(mode="after")
    def _mfu_or_reason(self) -> PerformanceMetrics:
        if self.mfu is None and not self.mfu_reason:
            raise ValueError("performance_metrics.mfu is null without mfu_reason")
        return self


class MemoryMetrics(Block):
    """Device memory (GiB) as the allocator and, where logged, the device report it."""

    avg_allocated_gb: NonNegative | None = None
    peak_allocated_gb: NonNegative | None = None
    peak_reserved_gb: NonNegative | None = None
    total_memory_gb: NonNegative | None = None
    basis: str | None = None
    device_used_peak_gb: NonNegative | None = None
    device_used_mean_measured_gb: NonNegative | None = None
    device_used_basis: str | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _peak_or_reason(self) -> MemoryMetrics:
        if self.peak_allocated_gb is None and self.device_used_peak_gb is None and not self.reason:
            raise ValueError("memory_metrics has no peak and no reason")
        return self


class MemoryEstimate(Block):
    """The memory check's estimate of the peak per GPU, made before launch (``utils/measure/memory.py``), in GiB.

    Kept beside ``memory_metrics`` (the measured peak) so the two can be read together. ``fits`` is
    None with a ``reason`` where the GPU's memory is unknown; ``forced`` records ``--force`` past a refusal.
    """

    peak_gb: NonNegative
    phase: str
    framework: str
    sharding: str
    param_dtype: str
    reduce_dtype: str
    model: str
    parameters: Count
    parameters_per_gpu: Count
    terms_gb: dict[str, NonNegative] = Field(default_factory=dict)
    device_name: str | None = None
    device_memory_gb: NonNegative | None = None
    device_basis: str | None = None
    fits: bool | None = None
    forced: bool = False
    reason: str | None = None

    @model_validator(mode="after")
    def _fits_or_reason(self) -> MemoryEstimate:
        if self.fits is None and not self.reason:
            raise ValueError("memory_estimate.fits is null without a reason")
        return self


class PowerMetrics(Block):
    """Board power and energy over the measured steps (``utils/measure/power.py``); ``None`` where not measured."""

    avg_power_w_per_gpu: NonNegative | None = None
    per_gpu_avg_power_w: list[NonNegative | None] | None = None
    energy_j: NonNegative | None = None
    energy_kwh: NonNegative | None = None
    tokens: Count | None = None
    tokens_per_kwh: NonNegative | None = None
    duration_s: NonNegative | None = None
    samples: Count | None = None
    sample_rate_hz: NonNegative | None = None
    read_errors: Count | None = None
    gpus_measured: Count = 0
    gpus_total: Count | None = None
    energy_source: Literal["energy_counter", "power_sampler", "log", "none"] = "none"
    method: str | None = None
    window: str | None = None  # which window of steps the energy covers (utils/measure/energy_trace.py)
    # the wall clock (Unix s) at the measured window's ends, as an in-process trainer measured them
    window_start_unix: NonNegative | None = None
    window_end_unix: NonNegative | None = None
    reason: str | None = None

    @model_validator(mode="after")
    def _energy_or_reason(self) -> PowerMetrics:
        if (self.energy_j is None or self.tokens_per_kwh is None) and not self.reason:
            raise ValueError("power_metrics lacks energy or tokens per kWh without a reason")
        return self


class Problem(Block):
    """A line of a log that explains a failure (``utils/result/failures.py`` classifies it)."""

    kind: str
    line_no: Count | None = None
    text: str


class SourceFile(Block):
    path: str
    sha256: str | None = None


class Source(Block):
    """Where the numbers came from: in-process measurement, a log, or TensorBoard events."""

    kind: SourceKind
    log_path: str | None = None
    files: list[SourceFile] = Field(default_factory=list)
    format: str | None = None
    lines: Count | None = None
    iteration_lines: Count | None = None
    returncode: int | None = None
    problems: list[Problem] = Field(default_factory=list)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    command: list[str] | None = None
    generated_files: list[str] = Field(default_factory=list)


class Profiling(Block):
    """Which steps ran under the PyTorch profiler, and where the trace is."""

    steps: list[int] | None = None
    step_numbering: str | None = None
    trace: str | None = None
    rank0_trace: str | None = None
    reason: str | None = None


# ---------------------------------------------------------------------------
# time to quality (issue 34)

# The figures "to target" a quality block holds; each is null with its reason in ``null_reasons``.
TO_TARGET_FIELDS = ("time_to_target_s", "samples_to_target", "tokens_to_target", "energy_to_target_kwh",
                    "gpu_hours_to_target")


class Evaluation(Block):
    """One held-out evaluation, after training step ``step`` (1-based).

    ``seconds`` is the wall time from the first training step's start (MLPerf's run_start) to this evaluation's end,
    evaluation time included; ``unix_s`` is that end on the host's wall clock (``Quality.run_start_unix`` is the
    origin), so a later reader (an MLPerf log, issue 35) can place it. A NaN or infinite loss is recorded as ``None``
    with ``loss_reason``.
    """

    step: Positive
    samples: Count
    tokens: Count
    seconds: NonNegative
    loss: Figure | None
    loss_reason: str | None = None
    eval_seconds: NonNegative | None = None
    unix_s: NonNegative | None = None

    @model_validator(mode="after")
    def _loss_or_reason(self) -> Evaluation:
        if self.loss is None and not self.loss_reason:
            raise ValueError(f"evaluation at step {self.step}: loss is null without loss_reason")
        return self


class Quality(Block):
    """Held-out evaluations and the time, samples, tokens, energy and GPU-hours to a target loss.

    Produced only by ``utils/measure/quality.py: build_quality`` (``None`` on a result when evaluation is off).
    ``reached``: an evaluation's loss is at or below ``target_loss``; the figures to target are those of the first
    such evaluation. ``stopped_at_target``: the run ended there (STOP_AT_TARGET), which is an ``ok`` ending.
    ``stop_reason`` says why the run ended before TRAIN_ITERS (target reached, a NaN eval loss). ``reduction`` says how
    this stack reduces the eval loss (docs/ARCHITECTURE.md, issue 34: the per-token mean over all evaluated tokens).
    ``fixed_set``: every evaluation read the same first ``eval_samples`` validation sequences, MLPerf's measure (issue
    50); False: each read the next block; None: not recorded (a result written before issue 50). ``measure`` says it.
    """

    eval_samples: Positive
    eval_interval_samples: Positive
    eval_interval_steps: Positive
    reduction: str
    fixed_set: bool | None = None
    measure: str | None = None
    target_loss: Annotated[float, Field(gt=0, le=MAX_FIGURE)] | None = None
    stop_at_target: bool = True
    run_start_unix: NonNegative | None = None
    evaluations: list[Evaluation] = Field(default_factory=list, max_length=MAX_STEPS)  # at most one per step
    reached: bool = False
    stopped_at_target: bool = False
    stop_reason: str | None = None
    time_to_target_s: NonNegative | None = None
    samples_to_target: Count | None = None
    tokens_to_target: Count | None = None
    energy_to_target_kwh: NonNegative | None = None
    gpu_hours_to_target: NonNegative | None = None
    null_reasons: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Quality:
        for before, after in zip(self.evaluations, self.evaluations[1:], strict=False):
            if after.step <= before.step or after.samples < before.samples or after.seconds < before.seconds:
                raise ValueError(f"quality.evaluations: step {after.step} does not follow step {before.step} with "
                                 "more steps, samples and seconds")
        missing = [name for name in TO_TARGET_FIELDS if getattr(self, name) is None and name not in self.null_reasons]
        if missing:
            raise ValueError(f"quality: {', '.join(missing)} null without a reason in null_reasons")
        if self.stopped_at_target and not self.reached:
            raise ValueError("quality: stopped_at_target without reaching the target")
        if self.reached:
            first = first_at_target(self)
            if first is None:
                raise ValueError(f"quality: reached, but no evaluation's loss is at or below the target "
                                 f"{self.target_loss}")
            if self.samples_to_target is not None and self.samples_to_target != first.samples:
                raise ValueError(f"quality: samples_to_target={self.samples_to_target} but the first evaluation at "
                                 f"the target is at {first.samples} samples")
            if self.time_to_target_s is not None and self.time_to_target_s != first.seconds:
                raise ValueError(f"quality: time_to_target_s={self.time_to_target_s} but the first evaluation at the "
                                 f"target ended at {first.seconds} s")
        else:
            if first_at_target(self) is not None:
                raise ValueError(f"quality: not reached, but an evaluation's loss is at or below the target "
                                 f"{self.target_loss}")
            if any(getattr(self, name) is not None for name in TO_TARGET_FIELDS):
                raise ValueError("quality: figures to target without the target reached")
        return self


def first_at_target(quality: Quality) -> Evaluation | None:
    """The first evaluation whose loss is at or below the target (None: none, or no target)."""
    if quality.target_loss is None:
        return None
    return next((e for e in quality.evaluations if e.loss is not None and e.loss <= quality.target_loss), None)
# MLPerf (issue 35: PROFILE=mlperf; utils/result/mllog.py produces it)


class MlperfCheck(Block):
    """MLPerf's compliance checker on the run's MLLOG for one ruleset: its verdict and its own messages.

    ``verdict`` is the checker's last line (SUCCESS or FAILED); None with ``reason`` when it did not finish.
    """

    ruleset: str
    verdict: Literal["SUCCESS", "FAILED"] | None
    messages: list[str] = Field(default_factory=list)
    reason: str | None = None


class MlperfRcp(Block):
    """What mlperf-logging's reference convergence points say about the run's GBS (``kind``: point, interpolated
    between points, or none), with the point's learning rate and warm-up samples where there is one."""

    gbs: Positive | None
    kind: Literal["point", "interpolated", "none"]
    source: str
    base_lr: NonNegative | None = None
    warmup_samples: Count | None = None
    note: str = ""


class Mlperf(Block):
    """A ``PROFILE=mlperf`` run's MLLOG (a file beside the result) and the checker's verdict on it.

    ``verdict`` is the ruleset of record's (``ruleset_of_record``, 6.0.0); ``checks`` holds every
    ruleset run. None with ``reason`` when no MLLOG could be written (no quality block, no
    mlperf-logging). ``derived_from`` says who wrote the MLLOG and from what.
    """

    benchmark: str
    derived_from: str
    not_a_submission: str
    checker: str | None = None
    ruleset_of_record: str | None = None
    mllog: str | None = None
    verdict: Literal["SUCCESS", "FAILED"] | None = None
    checks: list[MlperfCheck] = Field(default_factory=list)
    rcp: MlperfRcp | None = None
    reason: str | None = None


class Published(Block):
    """A run someone else measured and published: an MLPerf Training submission's run (the MLPerf importer, issue 48).

    Never tprimat's measurement: such a result's ``framework`` is :data:`PUBLISHED_FRAMEWORK` (the submitter's
    framework is ``framework`` here, as its system description states it), its ``source.kind`` is ``mlperf`` and
    ``log`` is the run's place inside the results repository, never a path of the machine that imported it.
    ``score_min`` is MLPerf's score of the whole system (the olympic mean of its counted runs' minutes, times
    ``scaling_factor``), the same in each of its runs; ``counted`` says whether this run enters it, and why not.
    ``check`` is MLPerf's compliance checker's verdict on the log, None with ``check_reason`` when not run.
    """

    origin: str
    round: str
    submitter: str
    system: str
    system_id: str
    benchmark: str
    division: str
    availability: str
    accelerator: str
    nodes: Positive
    accelerators_per_node: Positive
    framework: str
    notes: str = ""
    log: str
    log_sha256: str
    run_status: str | None = None
    counted: bool
    counted_reason: str = ""
    score_min: NonNegative | None = None
    score_reason: str | None = None
    scaling_factor: NonNegative | None = None
    rcp: str | None = None
    check: Literal["SUCCESS", "FAILED"] | None = None
    check_reason: str | None = None


# ---------------------------------------------------------------------------
# the whole result


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
# One step as write_result writes it (indent 2): an entry in each per-step array, at most 29 bytes each (the
# longest repr of a finite float, 23 characters with its sign, after a 4-space indent, with its comma and line
# end)...
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
    """What a result file may hold at most, for the most steps a run may have (``MAX_STEPS``) with an evaluation
    after each: its bytes, its JSON values (each array entry, each member, each container) and its arrays and
    objects. The reader (utils/result/file.py ``read_result``) refuses a file past any of them before parsing it,
    so a forged file costs no more memory than the largest result a run can write (issue 33)."""

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
