"""From a scanned log (or TensorBoard events) to the typed, validated result of one run.

:func:`build_result`: a run tprimat launched, checked against the config's workload. :func:`build_log_result`: a
run tprimat did not launch; the workload is what the log says (:mod:`train.logs.workload`). Both share
:func:`measure`. Step arrays start at the first logged iteration (``Result.first_step``), one entry per logged
iteration (``Result.step_interval``); missing entries are null, warned and left out of every statistic. Step
times are per-iteration values, never running averages; throughput and MFU come from ``utils/measure/metrics.py``
as for every framework, the framework's own figures kept in ``framework_reported`` (a gap above 5% flagged).
Failures are data: ``status: failed|incomplete`` with the reason (``utils/result/file.py``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from train.logs.quality import foreign_settings, log_quality, read_record
from train.logs.scan import LogInputError, LogScan, scan_file
from train.logs.workload import LogRun, workload_mismatches
from utils.config.model import Config, default_skip_steps
from utils.dataset.fingerprint import log_fingerprint
from utils.io.hashing import sha256_file
from utils.machine.hardware import collect_gpu_info
from utils.measure.metrics import finite, framework_reported, memory_metrics
from utils.measure.power import log_power_metrics, null_power_metrics
from utils.result.failures import PROBLEM_PATTERNS, is_interrupted, shorten
from utils.result.file import finalize_result, new_result, update_result
from utils.result.step_log import record_steps
from utils.schema.hardware import Environment, FrameworkVersions, GpuInfo
from utils.schema.limits import MAX_STEPS
from utils.schema.measures import FrameworkReported, MemoryMetrics, PerformanceMetrics, PowerMetrics, Source, SourceFile
from utils.schema.model import Result
from utils.schema.run import Fingerprint
from utils.spec.models import ModelShape, workload_shape

MEMORY_REPORT_BASIS = "Megatron memory report (torch allocator, max over reporting ranks)"
TENSORBOARD_MEMORY_BASIS = "Megatron mem-*-bytes TensorBoard scalars (torch allocator, last rank)"
DEVICE_USED_BASIS = ("Primus 'hip mem usage' (torch.cuda.mem_get_info on the last rank: device-wide used memory, "
                     "including the caching allocator's reserve)")
FOREIGN_ENVIRONMENT = "log-analysis mode, a run tprimat did not launch: its environment is not known"
FOREIGN_VERSIONS = "a run tprimat did not launch: the log does not state its framework versions"
FOREIGN_FINGERPRINT = "a run tprimat did not launch: its data, tokenizer and code are not known"
MAX_SHOWN = 10
# Arrays hold one entry per logged interval; a numbering that would need far more entries than the log has
# lines (iteration 3, then 5,000,000) is not one run's, and would not fit in memory.
MAX_ENTRIES = 1_000_000
MAX_GAP_FACTOR = 100


@dataclass(frozen=True)
class StepLayout:
    """Which iterations the arrays hold: ``first``, ``first + stride``, ... (``count`` entries)."""

    first: int = 1
    stride: int = 1
    count: int = 0

    def iteration(self, index: int) -> int:
        return self.first + index * self.stride

    def entries(self, iterations: int) -> int:
        """Entries that ``iterations`` iterations span (warm-up given in iterations)."""
        return math.ceil(iterations / self.stride)


def step_layout(scan: LogScan) -> StepLayout:
    """First logged iteration, the logging interval (gcd of the gaps between logged iterations), entry count."""
    iterations = sorted({r.iteration for r in scan.iterations})
    if not iterations:
        return StepLayout()
    stride = 0
    for before, after in itertools.pairwise(iterations):
        stride = math.gcd(stride, after - before)
    stride = stride or 1
    count = (iterations[-1] - iterations[0]) // stride + 1
    if count > max(MAX_ENTRIES, MAX_GAP_FACTOR * len(iterations)):
        raise LogInputError(f"the log's {len(iterations)} iteration numbers run from {iterations[0]} to "
                            f"{iterations[-1]}, {count} steps apart at most every {stride}: not one run's numbering")
    if count > MAX_STEPS:  # the result's arrays hold at most this many entries (utils/schema/block.py)
        raise LogInputError(f"the log's iterations {iterations[0]} to {iterations[-1]} every {stride} are {count:,} "
                            f"steps, more than a result holds ({MAX_STEPS:,}: TRAIN_ITERS's bound)")
    return StepLayout(iterations[0], stride, count)


def step_arrays(scan: LogScan) -> tuple[dict[str, list[float | None]], StepLayout, list[str]]:
    """Per-entry arrays from the first logged iteration; entries missing from the log are None."""
    layout = step_layout(scan)
    by_iter = {r.iteration: r for r in scan.iterations}
    warnings: list[str] = []
    missing = layout.count - len(by_iter)
    if missing:
        gaps = (layout.iteration(i) for i in range(layout.count) if layout.iteration(i) not in by_iter)
        shown = list(itertools.islice(gaps, MAX_SHOWN))
        warnings.append(f"{missing} iteration(s) missing inside the log ({', '.join(map(str, shown))}"
                        f"{' ...' if missing > MAX_SHOWN else ''}): recorded as null, left out of the statistics")
    memory_at: dict[int, float] = {}
    for report in scan.memory:
        if report.iteration is not None:
            memory_at[report.iteration] = max(memory_at.get(report.iteration, 0.0), report.allocated_gb)
    arrays: dict[str, list[float | None]] = {"step_times": [], "loss_values": [], "learning_rates": [],
                                             "memory_allocated_gb": []}
    for index in range(layout.count):
        iteration = layout.iteration(index)
        record = by_iter.get(iteration)
        arrays["step_times"].append(record.step_time_s if record else None)
        arrays["loss_values"].append(finite(record.loss) if record else None)
        arrays["learning_rates"].append(finite(record.learning_rate) if record else None)
        arrays["memory_allocated_gb"].append(memory_at.get(iteration))
    return arrays, layout, warnings


def _median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(data) if data else None


def log_framework_reported(scan: LogScan, ours: PerformanceMetrics, measured_from: int) -> FrameworkReported:
    """The framework's own TFLOP/s and tokens/s (medians over the measured steps) beside ours."""
    measured = [r for r in scan.iterations if r.iteration >= measured_from]
    last = measured[-1] if measured else None
    return framework_reported(
        ours, source=f"{scan.log_format or 'unknown format'} iteration lines, median over measured steps",
        tflops_per_gpu=_median(r.tflops_per_gpu for r in measured),
        tokens_per_second_per_gpu=_median(r.tokens_per_gpu for r in measured),
        running_average={
            "tflops_per_gpu": last.framework_avg_tflops_per_gpu if last else None,
            "tokens_per_second_per_gpu": last.framework_avg_tokens_per_gpu if last else None,
            "step_time_seconds": last.framework_avg_step_time_s if last else None,
        },
    )


def log_memory(scan: LogScan, allocated_gb: list[float | None], measured_from: int,
               total_memory_gb: float | None) -> MemoryMetrics:
    """Allocator peaks from memory reports and Primus's device-wide usage, each labelled."""
    used = [r.device_used_gb for r in scan.iterations if r.device_used_gb is not None]
    measured_used = [r.device_used_gb for r in scan.iterations
                     if r.device_used_gb is not None and r.iteration >= measured_from]
    logged_total = next((r.device_total_gb for r in scan.iterations if r.device_total_gb), None)
    return memory_metrics(
        allocated_gb,
        peak_allocated_gb=max((r.max_allocated_gb for r in scan.memory), default=None),
        peak_reserved_gb=max((r.max_reserved_gb for r in scan.memory), default=None),
        total_memory_gb=total_memory_gb if total_memory_gb is not None else logged_total,
        basis=TENSORBOARD_MEMORY_BASIS if scan.kind == "tensorboard" else MEMORY_REPORT_BASIS,
        device_used_gb=used, device_used_measured_gb=measured_used, device_used_basis=DEVICE_USED_BASIS,
        reason="the log has no Megatron memory report line: allocator memory not known",
    )


def log_power(scan: LogScan, measured_from: int, layout: StepLayout, world_size: int | None,
              tokens_per_step: int | None) -> PowerMetrics:
    """Megatron's ``--log-energy`` fields over the measured steps (null with the reason when absent).

    With one entry per k iterations each entry's energy and time stand for k iterations.
    """
    measured = [r for r in scan.iterations if r.iteration >= measured_from and r.energy_j_per_gpu is not None]
    k = layout.stride
    if k > 1 and measured and not scan.interval_is_average:
        return null_power_metrics(f"only every {k}th step was logged: energy over the steps not known", world_size)
    return log_power_metrics([k * r.energy_j_per_gpu for r in measured if r.energy_j_per_gpu is not None],
                             [r.power_w_per_gpu for r in measured],
                             [None if r.step_time_s is None else k * r.step_time_s for r in measured],
                             world_size=world_size, tokens_per_step=None if tokens_per_step is None
                             else k * tokens_per_step)


def assess(scan: LogScan, cfg: Config | None, returncode: int | None) -> tuple[str, str | None, list[str]]:
    """(status, reason, warnings) from the exit code, the problems found and, with ``cfg``, the workload.

    A log that simply stops early is ``ok`` here: :func:`utils.result.file.finalize_result`
    turns fewer steps than TRAIN_ITERS into ``incomplete`` with the count.
    """
    warnings: list[str] = []
    findings: list[str] = []
    for kind, _ in PROBLEM_PATTERNS:
        hits = [p for p in scan.problems if p.kind == kind]
        if hits:
            findings.append(f"{kind} (line {hits[0].line_no}: {hits[0].text[:200]})")
    if scan.nan_steps and not any(f.startswith("NaN loss") for f in findings):
        findings.append(f"NaN loss at iteration(s) {', '.join(str(i) for i in scan.nan_steps[:10])}")
    if cfg is not None:
        findings += workload_mismatches(scan, cfg)
    if returncode is not None and returncode != 0:
        last = scan.last_lines[-1][:200] if scan.last_lines else "(empty log)"
        cause = "; ".join(findings) or (f"last exception: {scan.exceptions[-1].text[:200]}" if scan.exceptions
                                         else f"no error recognised in the log; last line: {last}")
        interrupted = is_interrupted(returncode)
        status = "incomplete" if interrupted and not findings else "failed"
        word = "interrupted" if interrupted else "exited with code"
        return status, shorten(f"process {word} {returncode}: {cause}"), warnings
    if findings:
        return "failed", shorten("; ".join(findings)), warnings
    if not scan.iterations:
        what = "TensorBoard steps with a step time" if scan.kind == "tensorboard" else "iteration lines"
        return "failed", shorten(f"no {what} in the log" + (
            f"; last exception: {scan.exceptions[-1].text[:200]}" if scan.exceptions else "")), warnings
    if returncode is None:
        warnings.append("exit code unknown (log-analysis mode): status judged from the log alone")
    return "ok", None, warnings


def first_useful_scan(paths: list[Path]) -> tuple[LogScan, Path, list[str]]:
    """The first log with iteration lines (else the first readable one), and notes on unreadable ones."""
    notes: list[str] = []
    first: tuple[LogScan, Path] | None = None
    for path in paths:
        try:
            scan = scan_file(path)
        except OSError as exc:
            notes.append(f"cannot read log {path}: {exc.strerror or exc}")
            continue
        if scan.iterations:
            return scan, path, notes
        first = first or (scan, path)
    if first is None:
        scan = LogScan()
        scan.warnings.append("no log could be read")
        return scan, paths[0], notes
    return first[0], first[1], notes


def source_files(paths: Iterable[Path]) -> list[SourceFile]:
    """Each file with its sha256 (None when it cannot be read any more)."""
    files = []
    for path in paths:
        try:
            digest = sha256_file(path)
        except OSError:
            digest = None
        files.append(SourceFile(path=str(Path(path).resolve()), sha256=digest))
    return files


def _source(scan: LogScan, log: Path, returncode: int | None) -> Source:
    return Source(
        kind="tensorboard" if scan.kind == "tensorboard" else "log", log_path=str(log),
        files=source_files(scan.files or ([log] if Path(log).is_file() else [])), format=scan.log_format,
        lines=scan.line_count, iteration_lines=len(scan.iterations), returncode=returncode,
        problems=(scan.problems + scan.exceptions)[:20],
        first_timestamp=next((r.timestamp for r in scan.iterations if r.timestamp), None),
        last_timestamp=next((r.timestamp for r in reversed(scan.iterations) if r.timestamp), None),
    )


def measure(result: Result, scan: LogScan, *, shape: ModelShape, skip_iterations: int | None,
            world_size: int | None) -> list[str]:
    """Arrays, performance, memory, framework-reported and power blocks of ``result``; returns warnings.

    ``skip_iterations`` is the warm-up in iterations from the first logged one; None:
    max(2, 10%) of the entries the log holds.
    """
    arrays, layout, warnings = step_arrays(scan)
    update_result(result, first_step=max(layout.first, 1), step_interval=layout.stride)
    skip = default_skip_steps(layout.count) if skip_iterations is None else layout.entries(skip_iterations)
    measured_from = layout.iteration(skip)
    memory = log_memory(scan, arrays["memory_allocated_gb"], measured_from, result.gpu_info.total_memory_gb)
    performance = record_steps(result, arrays, skip_steps=skip, shape=shape, world_size=world_size, memory=memory)
    if layout.stride > 1:
        warnings.append(f"the log has one entry every {layout.stride} iterations: each array entry is the "
                        + ("framework's average over its interval" if scan.interval_is_average
                           else "value of that one step"))
        total = performance.total_time_seconds
        if scan.interval_is_average and total is not None:
            performance.total_time_seconds = total * layout.stride
            performance.total_time_basis = ("sum of every logged entry times step_interval (each is the average "
                                            "over its interval), warm-up included")
        else:
            performance.total_time_seconds = None
            performance.total_time_basis = f"not known: only every {layout.stride}th step's time was logged"
    performance.framework_reported = log_framework_reported(scan, performance, measured_from)
    tokens = result.training_config.global_batch_size, result.training_config.sequence_length
    result.power_metrics = log_power(scan, measured_from, layout, world_size,
                                     tokens[0] * tokens[1] if tokens[0] and tokens[1] else None)
    flagged = [d for d in performance.framework_reported.disagreements if d.flagged]
    if flagged:
        gaps = ", ".join(f"{d.metric} {d.relative_gap:.1%}" for d in flagged)
        warnings.append(f"our throughput and the framework's own disagree by more than 5%: {gaps}")
    return warnings


def build_result(
    cfg: Config,
    *,
    log_path: Path,
    platform: str,
    framework: str,
    model: str,
    returncode: int | None,
    shape: ModelShape | None = None,
    gpu_info: GpuInfo | None = None,
    launcher_env: dict[str, str] | None = None,
    run_index: int | None = None,
    fingerprint: Fingerprint | None = None,
    precision_effective: str | None = None,
    extra_logs: Iterable[Path] = (),
    scan: LogScan | None = None,
) -> Result:
    """The validated result of one Megatron/Primus run tprimat launched, read from ``log_path``.

    ``extra_logs`` are read when the main log has no iteration lines (Primus's
    ``TRAIN_LOG`` when stdout was lost). A missing log is a failed result, not an error.
    ``scan`` is the already-scanned log (``evaluate.extract`` scans before it decides).
    """
    shape = shape or workload_shape(cfg, model)
    notes: list[str] = []
    used_log = Path(log_path)
    if scan is None:
        scan, used_log, notes = first_useful_scan([Path(log_path), *map(Path, extra_logs)])
    if scan.padded_vocab is not None and scan.padded_vocab != shape.vocab_size:
        notes.append(f"the log reports a padded vocabulary of {scan.padded_vocab}, not {shape.vocab_size}: "
                     "FLOPs use the logged size")
        shape = workload_shape(cfg, model, vocab_size=scan.padded_vocab)
    result = new_result(
        cfg, platform=platform, framework=framework, model=model, shape=shape,
        gpu_info=gpu_info or collect_gpu_info(platform, "fp8" if cfg.fp8 else "bf16"),
        source=_source(scan, used_log, returncode), run_index=run_index, launcher_env=launcher_env,
        fingerprint=fingerprint, precision_effective=precision_effective,
    )
    measured = measure(result, scan, shape=shape, skip_iterations=cfg.skip_steps, world_size=cfg.world_size)
    status, reason, status_warnings = assess(scan, cfg, returncode)
    quality, quality_notes = log_quality(cfg, scan.evaluations, scan.iterations, framework=framework,
                                         platform=platform, gpus=cfg.world_size, record=read_record(Path(log_path)))
    result.quality = quality
    if status == "ok" and quality is not None and quality.stop_reason and quality.evaluations[-1].loss is None:
        status, reason = "failed", quality.stop_reason  # a NaN evaluation stopped the run, as a NaN step fails it
    result.warnings.extend([*notes, *scan.warnings, *measured, *status_warnings, *quality_notes])
    return finalize_result(result, status, reason)


def build_log_result(
    scan: LogScan,
    run: LogRun,
    *,
    platform: str,
    framework: str,
    gpu_info: GpuInfo,
    returncode: int | None = None,
    skip_iterations: int | None = None,
    run_index: int | None = None,
    notes: Iterable[str] = (),
) -> Result:
    """The validated result of a run tprimat did not launch: workload and model from the log (``run``)."""
    log = scan.files[0] if scan.files else Path("-")
    result = new_result(
        None, platform=platform, framework=framework, model=run.model, shape=run.shape, gpu_info=gpu_info,
        source=_source(scan, log, returncode), run_index=run_index, training=run.training,
        fingerprint=log_fingerprint(run.shape, FOREIGN_FINGERPRINT),
        environment=Environment(captured_by=FOREIGN_ENVIRONMENT),
    )
    result.framework_versions = FrameworkVersions(unknown={"all": FOREIGN_VERSIONS})
    measured = measure(result, scan, shape=run.shape, skip_iterations=skip_iterations,
                       world_size=run.training.num_gpus)
    status, reason, status_warnings = assess(scan, None, returncode)
    training = run.training
    settings, quality_notes = foreign_settings(scan.arguments, scan.evaluations, scan.validation_steps,
                                               training.global_batch_size, training.sequence_length)
    if settings is not None:
        result.quality, more = log_quality(settings, scan.evaluations, scan.iterations, framework=framework,
                                           platform=platform, gpus=training.num_gpus or 1)
        quality_notes += more
    notes = [*notes, *quality_notes]
    total = run.training.max_steps
    if status == "ok" and scan.truncated:
        status, reason = "incomplete", scan.truncated
    elif status == "ok" and total is not None and scan.last_iteration < total:
        status, reason = "incomplete", f"the log ends at iteration {scan.last_iteration} of {total}"
    result.warnings.extend([*notes, *run.notes, *scan.warnings, *measured, *status_warnings])
    return finalize_result(result, status, reason)
