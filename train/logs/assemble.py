"""From a scanned Megatron-LM/Primus log to the typed, validated result of one run.

Step times are the per-iteration (instantaneous) values, never the framework's
running averages; throughput, FLOPs and MFU are then computed by ``utils/metrics.py``
exactly as for every other framework. The framework's own TFLOP/s and tokens/s are
kept in ``performance_metrics.framework_reported`` and a gap above 5% is flagged.
Energy comes from Megatron's ``--log-energy`` fields through ``utils/power.py``.
Failures are data: an exit code, out-of-memory, NCCL/RCCL errors, NaN loss or a log
that stops early give ``status: failed|incomplete`` with the reason, finalised by
``utils/result.py`` ("k of n steps done" included).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from pathlib import Path

from train.logs.scan import LogScan, scan_file
from utils.configure import Config
from utils.failures import PROBLEM_PATTERNS, is_interrupted, shorten
from utils.hardware import collect_gpu_info
from utils.metrics import finite, framework_reported, memory_metrics, record_steps
from utils.models import ModelShape, get_shape
from utils.power import log_power_metrics
from utils.result import finalize_result, new_result
from utils.result_model import (
    Fingerprint,
    FrameworkReported,
    GpuInfo,
    MemoryMetrics,
    PerformanceMetrics,
    PowerMetrics,
    Result,
    Source,
)

MEMORY_REPORT_BASIS = "Megatron memory report (torch allocator, max over reporting ranks)"
DEVICE_USED_BASIS = ("Primus 'hip mem usage' (torch.cuda.mem_get_info on the last rank: device-wide used memory, "
                     "including the caching allocator's reserve)")


def step_arrays(scan: LogScan) -> tuple[dict[str, list[float | None]], list[str]]:
    """Per-step arrays indexed by iteration (1-based in the log, 0-based here); gaps are None."""
    warnings: list[str] = []
    count = scan.last_iteration
    by_iter = {r.iteration: r for r in scan.iterations}
    missing = [i for i in range(1, count + 1) if i not in by_iter]
    if missing:
        shown = ", ".join(str(i) for i in missing[:10]) + (" ..." if len(missing) > 10 else "")
        warnings.append(f"{len(missing)} iteration(s) missing from the log ({shown}): recorded as null")
    memory_at: dict[int, float] = {}
    for report in scan.memory:
        if report.iteration is not None:
            memory_at[report.iteration] = max(memory_at.get(report.iteration, 0.0), report.allocated_gb)
    arrays: dict[str, list[float | None]] = {"step_times": [], "loss_values": [], "learning_rates": [],
                                             "memory_allocated_gb": []}
    for i in range(1, count + 1):
        record = by_iter.get(i)
        arrays["step_times"].append(record.step_time_s if record else None)
        arrays["loss_values"].append(finite(record.loss) if record else None)
        arrays["learning_rates"].append(finite(record.learning_rate) if record else None)
        arrays["memory_allocated_gb"].append(memory_at.get(i))
    return arrays, warnings


def _median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(data) if data else None


def log_framework_reported(scan: LogScan, ours: PerformanceMetrics, skip_steps: int) -> FrameworkReported:
    """The framework's own TFLOP/s and tokens/s (medians over the measured steps) beside ours."""
    measured = [r for r in scan.iterations if r.iteration > skip_steps]
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


def log_memory(scan: LogScan, allocated_gb: list[float | None], skip_steps: int,
               total_memory_gb: float | None) -> MemoryMetrics:
    """Allocator peaks from memory reports and Primus's device-wide usage, each labelled."""
    used = [r.device_used_gb for r in scan.iterations if r.device_used_gb is not None]
    measured_used = [r.device_used_gb for r in scan.iterations
                     if r.device_used_gb is not None and r.iteration > skip_steps]
    logged_total = next((r.device_total_gb for r in scan.iterations if r.device_total_gb), None)
    return memory_metrics(
        allocated_gb,
        peak_allocated_gb=max((r.max_allocated_gb for r in scan.memory), default=None),
        peak_reserved_gb=max((r.max_reserved_gb for r in scan.memory), default=None),
        total_memory_gb=total_memory_gb if total_memory_gb is not None else logged_total,
        basis=MEMORY_REPORT_BASIS, device_used_gb=used, device_used_measured_gb=measured_used,
        device_used_basis=DEVICE_USED_BASIS,
        reason="the log has no Megatron memory report line: allocator memory not known",
    )


def log_power(scan: LogScan, cfg: Config) -> PowerMetrics:
    """Megatron's ``--log-energy`` fields over the measured steps (null with the reason when absent)."""
    measured = [r for r in scan.iterations if r.iteration > cfg.skip_steps and r.energy_j_per_gpu is not None]
    return log_power_metrics([r.energy_j_per_gpu for r in measured if r.energy_j_per_gpu is not None],
                             [r.power_w_per_gpu for r in measured], [r.step_time_s for r in measured],
                             world_size=cfg.world_size, tokens_per_step=cfg.tokens_per_step)


def assess(scan: LogScan, cfg: Config, returncode: int | None) -> tuple[str, str | None, list[str]]:
    """(status, reason, warnings) from the exit code, the problems found and the workload the log ran.

    A log that simply stops early is ``ok`` here: :func:`utils.result.finalize_result`
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
    if scan.train_iters is not None and scan.train_iters != cfg.train_iters:
        findings.append(f"the log trains {scan.train_iters} iterations but TRAIN_ITERS={cfg.train_iters}: "
                        "it is not this workload")
    batches = {r.global_batch_size for r in scan.iterations if r.global_batch_size is not None}
    if batches and batches != {cfg.gbs}:
        findings.append(f"the log's global batch size {sorted(batches)} is not GBS={cfg.gbs}: not this workload")
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
        return "failed", shorten("no Megatron iteration lines in the log" + (
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


def _source(scan: LogScan, log: Path, returncode: int | None) -> Source:
    return Source(
        kind="log", log_path=str(log), format=scan.log_format, lines=scan.line_count,
        iteration_lines=len(scan.iterations), returncode=returncode, problems=(scan.problems + scan.exceptions)[:20],
        first_timestamp=next((r.timestamp for r in scan.iterations if r.timestamp), None),
        last_timestamp=next((r.timestamp for r in reversed(scan.iterations) if r.timestamp), None),
    )


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
) -> Result:
    """The validated result of one Megatron/Primus run read from ``log_path``.

    ``extra_logs`` are read when the main log has no iteration lines (Primus's
    ``TRAIN_LOG`` when stdout was lost). A missing log is a failed result, not an error.
    """
    shape = shape or get_shape(model, cfg.model_size)
    scan, used_log, notes = first_useful_scan([Path(log_path), *map(Path, extra_logs)])
    if scan.padded_vocab is not None and scan.padded_vocab != shape.vocab_size:
        notes.append(f"the log reports a padded vocabulary of {scan.padded_vocab}, not {shape.vocab_size}: "
                     "FLOPs use the logged size")
        shape = get_shape(model, cfg.model_size, vocab_size=scan.padded_vocab)
    result = new_result(
        cfg, platform=platform, framework=framework, model=model, shape=shape,
        gpu_info=gpu_info or collect_gpu_info(platform, "fp8" if cfg.fp8 else "bf16"),
        source=_source(scan, used_log, returncode), run_index=run_index, launcher_env=launcher_env,
        fingerprint=fingerprint, precision_effective=precision_effective,
    )
    arrays, gap_warnings = step_arrays(scan)
    memory = log_memory(scan, arrays["memory_allocated_gb"], cfg.skip_steps, result.gpu_info.total_memory_gb)
    performance = record_steps(result, arrays, skip_steps=cfg.skip_steps, shape=shape, world_size=cfg.world_size,
                               memory=memory)
    performance.framework_reported = log_framework_reported(scan, performance, cfg.skip_steps)
    result.power_metrics = log_power(scan, cfg)
    status, reason, status_warnings = assess(scan, cfg, returncode)
    result.warnings.extend([*notes, *scan.warnings, *gap_warnings, *status_warnings])
    flagged = [d for d in performance.framework_reported.disagreements if d.flagged]
    if flagged:
        gaps = ", ".join(f"{d.metric} {d.relative_gap:.1%}" for d in flagged)
        result.warnings.append(f"our throughput and the framework's own disagree by more than 5%: {gaps}")
    return finalize_result(result, status, reason)
