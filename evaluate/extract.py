"""Megatron-LM and Primus logs -> the unified result: the one parser both log-based launchers use.

``mega`` and ``prim`` cannot be measured in-process, so their numbers come from the
per-iteration lines their trainers print (formats in shared FORMATS.md):

* Megatron-LM: `` [2025-05-01 10:00:00] iteration  3/ 100 | ... | elapsed time per iteration (ms): 9876.5 |``
  (core_v0.12; newer versions add microseconds and ``energy``/``power`` fields,
  older ones have no timestamp and no throughput);
* Primus legacy: ``inst/avg`` pairs for elapsed time, ``throughput per GPU`` and
  ``tokens per GPU``, plus ``hip mem usage/free/total/usage_ratio``;
* Primus newer: ``compute per GPU (TFLOP/s/GPU): X (avg Y)`` and
  ``tokens/s/GPU inst/harmonic mean: X/Y``;

wrapped in loguru prefixes, ANSI colours and torchrun ``[defaultN]:`` tags, which
are ignored: fields are found by their labels anywhere in a line. Megatron's memory
report lines (``memory (MB)`` and the GB variant) give allocator memory.

Step times are the per-iteration (instantaneous) values, never the framework's
running averages; throughput and MFU are then computed by :mod:`utils.monitor`
exactly as for every other framework. The framework's own TFLOP/s and tokens/s
are kept under ``performance_metrics.framework_reported`` and a gap above 5% is
flagged. Failures are data: an exit code, out-of-memory, NCCL/RCCL errors, NaN
loss or a log that stops early give ``status: failed|incomplete`` with the reason.

CLI (log-analysis mode, no GPU needed)::

    python -m evaluate.extract LOG --platform amd --framework prim --model llama [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.configure import Config, ConfigError, load_config
from utils.hardware import collect_gpu_info, gpu_info_for_device
from utils.models import ModelShape, get_shape
from utils.monitor import fill_result, framework_disagreement
from utils.result import ResultError, finalize_result, new_result, validate, write_result
from utils.result_model import GpuInfo

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
NUM_OR_NAN = rf"(?:{NUM}|[-+]?(?:nan|inf(?:inity)?))"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
TORCHRUN_TAG = re.compile(r"^\s*\[(?:default|rank)\d+\]:\s?")

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\]\s*iteration\b")
ELAPSED = re.compile(rf"elapsed time per iteration \(ms\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TFLOPS_PAIR = re.compile(rf"throughput per GPU \(TFLOP/s/GPU\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TFLOPS_NEW = re.compile(rf"compute per GPU \(TFLOP/s/GPU\):\s*({NUM})(?:\s*\(avg\s*({NUM})\))?")
TOKENS_PAIR = re.compile(rf"tokens per GPU \(tokens/s/GPU\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TOKENS_NEW = re.compile(rf"tokens/s/GPU inst/harmonic mean:\s*({NUM})\s*/\s*({NUM})")
LEARNING_RATE = re.compile(rf"learning rate:\s*({NUM})")
GLOBAL_BATCH = re.compile(r"global batch size:\s*(\d+)")
LM_LOSS = re.compile(rf"lm loss:\s*({NUM_OR_NAN})", re.IGNORECASE)
LOSS_SCALE = re.compile(rf"loss scale:\s*({NUM})")
GRAD_NORM = re.compile(rf"grad norm:\s*({NUM_OR_NAN})", re.IGNORECASE)
SKIPPED = re.compile(r"number of skipped iterations:\s*(\d+)")
NAN_ITERATIONS = re.compile(r"number of nan iterations:\s*(\d+)")
HIP_MEMORY = re.compile(
    rf"hip mem usage/free/total/usage_ratio:\s*({NUM})\s*Gi?B\s*/\s*({NUM})\s*Gi?B\s*/\s*({NUM})\s*Gi?B"
    rf"\s*/\s*({NUM})\s*%"
)
ENERGY = re.compile(rf"energy per GPU \(J/iter/GPU\):\s*({NUM})")
POWER = re.compile(rf"power per GPU \(W/GPU\):\s*({NUM})")
REPORT_CONTEXT = re.compile(r"(?:\[Rank\s+(\d+)\]\s*)?(?:\(after\s+(\d+)\s+iterations\)\s*)?memory \((?:MB|GB)\)")
MEMORY_MB = re.compile(
    rf"memory \(MB\)\s*\|\s*allocated:\s*({NUM})\s*\|\s*max allocated:\s*({NUM})\s*\|\s*reserved:\s*({NUM})"
    rf"\s*\|\s*max reserved:\s*({NUM})"
)
MEMORY_GB = re.compile(
    rf"memory \(GB\)\s*\|\s*current_allocated_mem:\s*({NUM})\s*\|\s*peak_allocated_mem:\s*({NUM})"
    rf"\s*\|\s*peak_reserved_mem:\s*({NUM})"
)
PADDED_VOCAB = re.compile(r"> padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")

# Problems that make a run failed even when its exit code is 0, most specific first.
PROBLEMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("out of memory", re.compile(r"out of memory|OutOfMemoryError|HIP_ERROR_OutOfMemory", re.IGNORECASE)),
    ("NCCL/RCCL error", re.compile(
        r"\b[NR]CCL (?:error|Error|ERROR)|nccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage|"
        r"InvalidArgument)Error|DistBackendError|Watchdog caught collective operation timeout|"
        r"ProcessGroupNCCL.*(?:Timeout at NCCL work|NCCL error|Exception)|NCCL communicator was aborted"
    )),
    ("NaN loss", re.compile(
        r"found NaN|NaN (?:detected|in (?:local )?grad|loss)|is NaN|Unexpected result nan|loss is nan",
        re.IGNORECASE,
    )),
)
EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:?.*")
INTERRUPTED_CODES = (130, 143)
MAX_REASON_CHARS = 400


@dataclass
class IterationRecord:
    """One per-iteration line, every field the log carried (None when absent)."""

    iteration: int
    train_iters: int
    line_no: int
    timestamp: str | None = None
    step_time_s: float | None = None
    framework_avg_step_time_s: float | None = None
    tflops_per_gpu: float | None = None
    framework_avg_tflops_per_gpu: float | None = None
    tokens_per_gpu: float | None = None
    framework_avg_tokens_per_gpu: float | None = None
    learning_rate: float | None = None
    global_batch_size: int | None = None
    loss: float | None = None
    loss_scale: float | None = None
    grad_norm: float | None = None
    skipped_iterations: int | None = None
    nan_iterations: int | None = None
    device_used_gb: float | None = None
    device_total_gb: float | None = None
    energy_j_per_gpu: float | None = None
    power_w_per_gpu: float | None = None


@dataclass
class MemoryReport:
    """A Megatron memory report line (allocator figures, GiB)."""

    iteration: int | None
    rank: int | None
    allocated_gb: float
    max_allocated_gb: float
    reserved_gb: float | None
    max_reserved_gb: float


@dataclass
class Problem:
    kind: str
    line_no: int
    text: str


@dataclass
class LogScan:
    """Everything parsed from one log."""

    iterations: list[IterationRecord] = field(default_factory=list)
    memory: list[MemoryReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    exceptions: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    padded_vocab: int | None = None
    line_count: int = 0
    log_format: str | None = None
    last_lines: list[str] = field(default_factory=list)

    @property
    def train_iters(self) -> int | None:
        return self.iterations[-1].train_iters if self.iterations else None

    @property
    def last_iteration(self) -> int:
        return max((r.iteration for r in self.iterations), default=0)

    @property
    def nan_steps(self) -> list[int]:
        return [r.iteration for r in self.iterations
                if (r.loss is not None and not math.isfinite(r.loss)) or (r.nan_iterations or 0) > 0]


def clean_line(raw: str) -> str:
    """Drop ANSI colour codes, carriage returns and a torchrun ``[defaultN]:`` tag."""
    text = ANSI.sub("", raw).replace("\r", "")
    return TORCHRUN_TAG.sub("", text).rstrip("\n")


def _float(match: re.Match[str] | None, group: int = 1) -> float | None:
    if match is None or match.group(group) is None:
        return None
    return float(match.group(group))


def parse_iteration(line: str, line_no: int) -> IterationRecord | None:
    """Fields of one iteration line; None when the line is not one."""
    head = ITERATION.search(line)
    if head is None:
        return None
    record = IterationRecord(iteration=int(head.group(1)), train_iters=int(head.group(2)), line_no=line_no)
    stamp = TIMESTAMP.search(line)
    record.timestamp = stamp.group(1) if stamp else None
    elapsed = ELAPSED.search(line)
    if elapsed:
        record.step_time_s = float(elapsed.group(1)) / 1000.0
        avg = _float(elapsed, 2)
        record.framework_avg_step_time_s = None if avg is None else avg / 1000.0
    tflops = TFLOPS_NEW.search(line) or TFLOPS_PAIR.search(line)
    record.tflops_per_gpu, record.framework_avg_tflops_per_gpu = _float(tflops), _float(tflops, 2)
    tokens = TOKENS_NEW.search(line) or TOKENS_PAIR.search(line)
    record.tokens_per_gpu, record.framework_avg_tokens_per_gpu = _float(tokens), _float(tokens, 2)
    record.learning_rate = _float(LEARNING_RATE.search(line))
    batch = GLOBAL_BATCH.search(line)
    record.global_batch_size = int(batch.group(1)) if batch else None
    record.loss = _float(LM_LOSS.search(line))
    record.loss_scale = _float(LOSS_SCALE.search(line))
    record.grad_norm = _float(GRAD_NORM.search(line))
    skipped, nans = SKIPPED.search(line), NAN_ITERATIONS.search(line)
    record.skipped_iterations = int(skipped.group(1)) if skipped else None
    record.nan_iterations = int(nans.group(1)) if nans else None
    hip = HIP_MEMORY.search(line)
    if hip:
        record.device_used_gb, record.device_total_gb = float(hip.group(1)), float(hip.group(3))
    record.energy_j_per_gpu = _float(ENERGY.search(line))
    record.power_w_per_gpu = _float(POWER.search(line))
    return record


def parse_memory(line: str) -> MemoryReport | None:
    """A ``memory (MB)`` (MiB values) or ``memory (GB)`` report; None otherwise."""
    context = REPORT_CONTEXT.search(line)
    if context is None:
        return None
    rank = int(context.group(1)) if context.group(1) else None
    iteration = int(context.group(2)) if context.group(2) else None
    mb = MEMORY_MB.search(line)
    if mb:
        values = [float(v) / 1024.0 for v in mb.groups()]
        return MemoryReport(iteration, rank, values[0], values[1], values[2], values[3])
    gb = MEMORY_GB.search(line)
    if gb:
        current, peak, peak_reserved = (float(v) for v in gb.groups())
        return MemoryReport(iteration, rank, current, peak, None, peak_reserved)
    return None


def _log_format(record: IterationRecord, line: str) -> str:
    if TFLOPS_NEW.search(line) or TOKENS_NEW.search(line):
        return "primus (compute/tokens per GPU with averages)"
    if record.framework_avg_step_time_s is not None:
        return "primus (legacy inst/avg pairs)"
    if record.timestamp is not None:
        return "megatron-lm (timestamped)"
    return "megatron-lm (no timestamp)"


def _same_measurement(a: IterationRecord, b: IterationRecord) -> bool:
    return (a.step_time_s, a.loss, a.learning_rate) == (b.step_time_s, b.loss, b.learning_rate)


def scan_lines(lines: Iterable[str]) -> LogScan:
    """Parse a whole log; a truncated final line or a line without a step time is reported, not used."""
    scan = LogScan()
    seen: dict[int, IterationRecord] = {}
    duplicates = conflicting = 0
    ends_with_newline = True
    tail: list[str] = []
    for line_no, raw in enumerate(lines, start=1):
        scan.line_count = line_no
        ends_with_newline = raw.endswith("\n")
        line = clean_line(raw)
        if line.strip():
            tail = [*tail[-9:], line.strip()]
        record = parse_iteration(line, line_no)
        if record is not None:
            if record.step_time_s is None:
                where = "the last line (truncated)" if not raw.endswith("\n") else f"line {line_no}"
                scan.warnings.append(f"iteration {record.iteration} on {where} has no elapsed time: ignored")
                continue
            if record.iteration in seen:
                duplicates += 1
                if not _same_measurement(seen[record.iteration], record):
                    conflicting += 1
                continue
            seen[record.iteration] = record
            scan.iterations.append(record)
            scan.log_format = scan.log_format or _log_format(record, line)
            continue
        report = parse_memory(line)
        if report is not None:
            scan.memory.append(report)
            continue
        padded = PADDED_VOCAB.search(line)
        if padded:
            scan.padded_vocab = int(padded.group(3))
            continue
        for kind, pattern in PROBLEMS:
            if pattern.search(line):
                scan.problems.append(Problem(kind, line_no, line.strip()))
                break
        else:
            if EXCEPTION_LINE.match(line) and not line.lstrip().startswith(("Traceback", "warnings.warn")):
                scan.exceptions.append(Problem("exception", line_no, line.strip()))
    scan.last_lines = tail
    if conflicting:
        scan.warnings.append(f"{conflicting} iteration(s) logged twice with different values: the first kept")
    elif duplicates:
        scan.warnings.append(f"{duplicates} duplicate iteration line(s) (e.g. forwarded to rank 0) ignored")
    if not ends_with_newline and scan.line_count:
        scan.warnings.append("the log's last line has no newline: the log was cut off mid-line")
    return scan


def scan_file(path: Path) -> LogScan:
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        return scan_lines(split_lines(handle.read()))


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n``; only ``\\n`` breaks a line (a progress bar's ``\\r`` does not)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # no trailing newline: the log was cut off mid-line
    return lines


# ---------------------------------------------------------------------------
# from a scan to the result


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

    def finite(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

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


def framework_reported(scan: LogScan, performance: dict[str, Any], skip_steps: int) -> dict[str, Any]:
    """The framework's own throughput over the measured steps, and how far it is from ours.

    TFLOP/s is compared with whichever of our two FLOP conventions (full or causal
    attention) is nearer, since Megatron releases differ in which they count; the
    gap is flagged only when the framework agrees with neither within 5%. Tokens/s
    has no convention and is compared directly.
    """
    measured = [r for r in scan.iterations if r.iteration > skip_steps]
    theirs_tflops = _median(r.tflops_per_gpu for r in measured)
    theirs_tokens = _median(r.tokens_per_gpu for r in measured)
    last = measured[-1] if measured else None
    block: dict[str, Any] = {
        "source": f"{scan.log_format or 'unknown format'} iteration lines, median over measured steps",
        "tflops_per_gpu": theirs_tflops,
        "tokens_per_second_per_gpu": theirs_tokens,
        "framework_running_avg": {
            "tflops_per_gpu": last.framework_avg_tflops_per_gpu if last else None,
            "tokens_per_second_per_gpu": last.framework_avg_tokens_per_gpu if last else None,
            "step_time_seconds": last.framework_avg_step_time_s if last else None,
        },
        "disagreement": [],
        "flagged": False,
    }
    ours_tflops = performance.get("tflops_per_gpu") or {}
    if theirs_tflops is not None and ours_tflops:
        candidates = [framework_disagreement(ours_tflops.get(conv), theirs_tflops, f"tflops_per_gpu ({conv})")
                      for conv in ("full", "causal")]
        candidates = [c for c in candidates if c is not None]
        if candidates:
            nearest = min(candidates, key=lambda c: c["relative_gap"])
            block["disagreement"].append({**nearest, "other_convention": [c for c in candidates if c is not nearest]})
    if theirs_tokens is not None:
        gap = framework_disagreement(performance.get("tokens_per_second_per_gpu"), theirs_tokens,
                                     "tokens_per_second_per_gpu")
        if gap is not None:
            block["disagreement"].append(gap)
    block["flagged"] = any(d["flagged"] for d in block["disagreement"])
    return block


def memory_extras(scan: LogScan, skip_steps: int) -> dict[str, Any]:
    """Allocator peaks from memory reports and Primus's device-wide usage, each labelled."""
    extras: dict[str, Any] = {"peak_allocated_gb": None, "peak_reserved_gb": None}
    if scan.memory:
        extras["peak_allocated_gb"] = max(r.max_allocated_gb for r in scan.memory)
        extras["peak_reserved_gb"] = max(r.max_reserved_gb for r in scan.memory)
        extras["basis"] = "Megatron memory report (torch allocator, max over reporting ranks)"
    used = [r.device_used_gb for r in scan.iterations if r.device_used_gb is not None]
    if used:
        measured = [r.device_used_gb for r in scan.iterations
                    if r.device_used_gb is not None and r.iteration > skip_steps] or used
        extras["device_used_gb"] = {"peak": max(used), "mean_measured": statistics.fmean(measured)}
        extras["device_total_gb_logged"] = next(r.device_total_gb for r in scan.iterations if r.device_total_gb)
        extras["device_used_basis"] = ("Primus 'hip mem usage' (torch.cuda.mem_get_info on the last rank: "
                                       "device-wide used memory, including the caching allocator's reserve)")
    return extras


def power_from_log(scan: LogScan, skip_steps: int, world_size: int, tokens_per_step: int) -> dict[str, Any]:
    """Megatron's ``--log-energy`` fields when present; otherwise null with the reason."""
    from utils.power import JOULES_PER_KWH, null_power_metrics

    measured = [r for r in scan.iterations if r.iteration > skip_steps and r.energy_j_per_gpu is not None]
    if not measured:
        return null_power_metrics("the log has no energy/power fields (Megatron prints them only with "
                                  "--log-energy); board power was not sampled for this framework")
    energy_j = sum(r.energy_j_per_gpu for r in measured) * world_size  # type: ignore[misc]
    powers = [r.power_w_per_gpu for r in measured if r.power_w_per_gpu is not None]
    tokens = len(measured) * tokens_per_step
    kwh = energy_j / JOULES_PER_KWH
    return {
        "avg_power_w_per_gpu": statistics.fmean(powers) if powers else None, "per_gpu_avg_power_w": None,
        "energy_j": energy_j, "energy_kwh": kwh, "tokens": tokens,
        "tokens_per_kwh": tokens / kwh if kwh > 0 else None,
        "duration_s": sum(r.step_time_s or 0.0 for r in measured), "samples": len(measured),
        "gpus_measured": world_size, "gpus_total": world_size,
        "method": "Megatron --log-energy: energy per GPU per iteration from the log, times the world size",
        "reason": None,
    }


def assess(scan: LogScan, cfg: Config, returncode: int | None) -> tuple[str, str | None, list[str]]:
    """(status, reason, warnings) from the exit code, the problems found and the iteration count."""
    warnings: list[str] = []
    findings: list[str] = []
    for kind in ("out of memory", "NCCL/RCCL error", "NaN loss"):
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
    done = scan.last_iteration
    progress = f"{done} of {cfg.train_iters} iterations in the log"
    if returncode is not None and returncode != 0:
        cause = "; ".join(findings) or (f"last exception: {scan.exceptions[-1].text[:200]}" if scan.exceptions
                                         else "no error recognised in the log; last line: "
                                         + (scan.last_lines[-1][:200] if scan.last_lines else "(empty log)"))
        interrupted = returncode < 0 or returncode in INTERRUPTED_CODES
        status = "incomplete" if interrupted and not findings else "failed"
        word = "interrupted" if interrupted else "exited with code"
        return status, _short(f"process {word} {returncode} ({progress}): {cause}"), warnings
    if findings:
        return "failed", _short(f"{'; '.join(findings)} ({progress})"), warnings
    if not scan.iterations:
        return "failed", _short("no Megatron iteration lines in the log" + (
            f"; last exception: {scan.exceptions[-1].text[:200]}" if scan.exceptions else "")), warnings
    if done < cfg.train_iters:
        return "incomplete", f"the log stops early: {progress}", warnings
    if returncode is None:
        warnings.append("exit code unknown (log-analysis mode): status judged from the log alone")
    return "ok", None, warnings


def _short(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


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
    fingerprint: dict[str, Any] | None = None,
    precision_effective: str | None = None,
    extra_logs: Iterable[Path] = (),
) -> dict[str, Any]:
    """The unified, validated result of one Megatron/Primus run read from ``log_path``.

    ``extra_logs`` are read when the main log has no iteration lines (Primus's
    ``TRAIN_LOG`` when stdout was lost). A missing log is a failed result, not an error.
    """
    shape = shape or get_shape(model, cfg.model_size)
    scan, used_log, notes = _scan_first_useful([Path(log_path), *map(Path, extra_logs)])
    if scan.padded_vocab is not None and scan.padded_vocab != shape.vocab_size:
        notes.append(f"the log reports a padded vocabulary of {scan.padded_vocab}, not {shape.vocab_size}: "
                     "FLOPs use the logged size")
        shape = get_shape(model, cfg.model_size, vocab_size=scan.padded_vocab)
    result = new_result(
        cfg, platform=platform, framework=framework, model=model, shape=shape,
        gpu_info=gpu_info or collect_gpu_info(platform, "fp8" if cfg.fp8 else "bf16"),
        source_kind="log", log_path=used_log, run_index=run_index, launcher_env=launcher_env,
        fingerprint=fingerprint, precision_effective=precision_effective,
    )
    arrays, gap_warnings = step_arrays(scan)
    extras = memory_extras(scan, cfg.skip_steps)
    memory_reason = None if extras["peak_allocated_gb"] is not None else (
        "the log has no Megatron memory report line: allocator memory not known")
    fill_result(
        result, arrays, skip_steps=cfg.skip_steps, global_batch_size=cfg.gbs, seq_len=cfg.sl,
        world_size=cfg.world_size, shape=shape, peak_allocated_gb=extras.pop("peak_allocated_gb"),
        peak_reserved_gb=extras.pop("peak_reserved_gb"), memory_reason=memory_reason,
    )
    result["memory_metrics"].update(extras)
    if result["memory_metrics"]["total_memory_gb"] is None and "device_total_gb_logged" in extras:
        result["memory_metrics"]["total_memory_gb"] = extras["device_total_gb_logged"]
    performance = result["performance_metrics"]
    performance["framework_reported"] = framework_reported(scan, performance, cfg.skip_steps)
    result["power_metrics"] = power_from_log(scan, cfg.skip_steps, cfg.world_size, cfg.tokens_per_step)
    status, reason, status_warnings = assess(scan, cfg, returncode)
    result["warnings"] += notes + scan.warnings + gap_warnings + status_warnings
    if performance["framework_reported"]["flagged"]:
        gaps = ", ".join(f"{d['metric']} {d['relative_gap']:.1%}" for d in performance["framework_reported"]
                         ["disagreement"] if d["flagged"])
        result["warnings"].append(f"our throughput and the framework's own disagree by more than 5%: {gaps}")
    result["source"].update(
        format=scan.log_format, lines=scan.line_count, iteration_lines=len(scan.iterations),
        returncode=returncode, problems=[p.__dict__ for p in (scan.problems + scan.exceptions)[:20]],
        first_timestamp=next((r.timestamp for r in scan.iterations if r.timestamp), None),
        last_timestamp=next((r.timestamp for r in reversed(scan.iterations) if r.timestamp), None),
    )
    finalize_result(result, status, reason)
    validate(result, f"result extracted from {used_log}")
    return result


def _scan_first_useful(paths: list[Path]) -> tuple[LogScan, Path, list[str]]:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluate.extract",
        description="Turn a Megatron-LM or Primus training log into a unified tprimat result "
        "(log-analysis mode: no GPU needed; the workload comes from the config). "
        "Exit 0 when the result's status is ok, 1 when it is incomplete or failed, 2 on bad input.",
    )
    parser.add_argument("log", type=Path, help="the training log (stdout of the run, or Primus's TRAIN_LOG)")
    parser.add_argument("--platform", required=True, choices=("amd", "nvd"))
    parser.add_argument("--framework", required=True, choices=("mega", "prim"))
    parser.add_argument("--model", required=True, choices=("llama", "qwen"))
    parser.add_argument("--output", type=Path, help="write the result here (atomically); default: print it")
    parser.add_argument("--returncode", type=int, default=None,
                        help="the run's exit code, if known (unknown: judged from the log alone)")
    parser.add_argument("--gpu-name", help="device the log came from, e.g. 'AMD Instinct MI300X', for the "
                        "peak FLOP/s and MFU (default: detect this machine's, usually none)")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"evaluate.extract: no such log file: {args.log}", file=sys.stderr)
        return 2
    try:
        cfg = load_config()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    gpu = gpu_info_for_device(args.platform, args.gpu_name, cfg.world_size) if args.gpu_name else None
    from evaluate.fingerprint import fingerprint
    from utils.dataset import dataset_prefix, tokenizer_dir

    shape = get_shape(args.model, cfg.model_size)
    result = build_result(
        cfg, log_path=args.log.resolve(), platform=args.platform, framework=args.framework, model=args.model,
        returncode=args.returncode, shape=shape, gpu_info=gpu, run_index=args.run_index,
        fingerprint=fingerprint(cfg, shape, dataset_prefix(cfg, args.model), tokenizer_dir(cfg, args.model)),
    )
    result["environment"]["captured_by"] = ("log-analysis mode: variables and libraries are this machine's, "
                                            "not the training run's")
    if gpu is not None:
        result["warnings"].append(f"gpu_info from --gpu-name {args.gpu_name!r}, not detected")
    try:
        if args.output:
            write_result(args.output, result)
            print(f"evaluate.extract: {args.output} status={result['status']}"
                  + (f" ({result['error']})" if result["error"] else ""), file=sys.stderr)
        else:
            print(json.dumps(result, indent=2, allow_nan=False))
    except (ResultError, OSError) as exc:
        print(f"evaluate.extract: {exc}", file=sys.stderr)
        return 2
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
