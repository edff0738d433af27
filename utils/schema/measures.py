"""What a run measured: step time, throughput, FLOPs and MFU, memory (estimated and measured), power and energy,
and where the numbers came from (the source, its log's problems, the profiler's trace)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from utils.schema.block import Block, Count, NonNegative, Positive

# mlperf: an MLLOG read back by the MLPerf importer (issue 48): a published submission's, or a PROFILE=mlperf run's
SourceKind = Literal["callback", "log", "tensorboard", "mlperf"]


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
    NULL_REASONS: ClassVar = {"mfu": "mfu_reason"}



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
    NULL_REASONS: ClassVar = {("peak_allocated_gb", "device_used_peak_gb"): "reason"}



class MemoryEstimate(Block):
    """The memory check's estimate of the peak per GPU, made before launch (``utils/measure/memory.py``), in GiB.

    Kept beside ``memory_metrics`` (the measured peak). ``fits`` is None with a ``reason`` where the GPU's memory is
    unknown; ``forced`` records ``--force`` past a refusal.
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
    NULL_REASONS: ClassVar = {"fits": "reason"}



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
    NULL_REASONS: ClassVar = {"energy_j": "reason", "tokens_per_kwh": "reason"}



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
