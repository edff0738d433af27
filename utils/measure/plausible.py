"""Which figures can be physically true: the one owner of plausibility bounds for results and prescreens.

Consistency is not plausibility: a consistent result can still be forged. Each bound is recomputed from the result's
own shape, workload and arrays, never from what it claims; readers apply them through ``utils/result/admit.py``.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from datetime import datetime

from utils.machine.hardware import PEAK_TFLOPS, peak_tflops
from utils.schema.model import Result
from utils.spec.models import ModelShape, flops_per_token
from utils.spec.registry import PLATFORMS

# A stated ceiling for a cpu run, per process: 1 PFLOP/s of bf16, above the H100's dense bf16 peak (989.4 in
# utils/machine/hardware.py) and far above any CPU package's matrix units. A cpu figure beyond it is forged or
# broken, not fast.
CPU_CEILING_TFLOPS = 1000.0
# A training step is a forward, a backward and an optimizer step: at least hundreds of kernels or loops, each
# microseconds. No stack measured here ever took under 100 us (tiny cpu steps take tens of ms,
# docs/PERFORMANCE.md); a step time below this is a unit error or a forgery.
STEP_TIME_FLOOR_S = 1e-4
# A step over a day is no training step a log or event file of this suite can hold (a 30-step run would take a month).
MAX_STEP_TIME_S = 86400.0
MAX_UTILISATION = 1.0
# The prescreen's measured GEMM peak may exceed the datasheet a little (boost clocks): at most this factor.
PRESCREEN_OVER_DATASHEET = 1.25
# A token's cross-entropy in nats: a uniform guess over the largest vocabulary here (Qwen 2.5's 152,064) costs
# ln V = 11.9 and a diverging run spikes to tens before it turns NaN (recorded null); a mean loss above this is a
# unit error or a forgery. Below 0 no cross-entropy can be.
MAX_LOSS = 1000.0
# An evaluation ends within the run: at most its duration (wall span or measured time) plus this much clock slack.
DURATION_SLACK = (1.01, 1.0)  # (factor, seconds)
# An accelerator's name says its vendor (MLPerf system descriptions name the accelerator the same way).
VENDORS = {"amd": ("AMD", "INSTINCT", "MI2", "MI3"), "nvd": ("NVIDIA", "H100", "H200", "B200", "B300", "A100")}
_TORCH_BUILDS = (("cpu", re.compile(r"\+cpu\b")), ("cuda", re.compile(r"\+cu\d")), ("rocm", re.compile(r"\+rocm")))


def step_time_problem(seconds: float | None) -> str | None:
    """Why a step time read from a foreign log or event file cannot be one (None: it can, or it is absent); bound where
    it is read, so such a step is dropped with a counted warning rather than failing the result."""
    if seconds is None:
        return None
    if not math.isfinite(seconds):
        return "not a finite number"
    if not STEP_TIME_FLOOR_S <= seconds <= MAX_STEP_TIME_S:
        return f"outside {STEP_TIME_FLOOR_S:g} s .. {MAX_STEP_TIME_S:g} s"
    return None


def _fastest(precision: str) -> float:
    return max(bf16 if precision == "bf16" else fp8 for _, bf16, fp8 in PEAK_TFLOPS)


def ceiling_tflops(result: Result) -> tuple[float, str]:
    """The most a process of this result's device can do at its precision, and what the figure is."""
    if result.platform == "cpu":
        return CPU_CEILING_TFLOPS, f"cpu ceiling of {CPU_CEILING_TFLOPS:g} TFLOP/s (utils/measure/plausible.py)"
    precision = "fp8" if "fp8" in (result.training_config.precision_effective or "") else "bf16"
    peak, _ = peak_tflops(result.gpu_info.device_name, precision)
    if peak is not None:
        return peak, f"{precision} datasheet peak of {peak:g} TFLOP/s"
    fastest = _fastest(precision)
    return fastest, f"fastest {precision} datasheet peak known ({fastest:g} TFLOP/s; the device is not in the table)"


def _measured(result: Result) -> list[float]:
    perf = result.performance_metrics
    skip = perf.skipped_steps if perf is not None else 0
    return [t for t in result.step_times[skip:] if t is not None]


def _tokens_per_second_per_gpu(result: Result) -> float | None:
    """The result's own figure, else GBS * SL / median step time / GPUs recomputed from its arrays."""
    perf = result.performance_metrics
    if perf is not None and perf.tokens_per_second_per_gpu is not None:
        return perf.tokens_per_second_per_gpu
    workload = result.training_config.workload
    measured = _measured(result)
    if not measured or not workload.GBS or not workload.SL or not workload.WORLD_SIZE:
        return None
    median = statistics.median(measured)
    return workload.GBS * workload.SL / median / workload.WORLD_SIZE if median > 0 else None


def _flops(result: Result) -> float | None:
    seq_len = result.training_config.workload.SL or result.training_config.sequence_length
    try:
        return flops_per_token(ModelShape(**result.model_shape.model_dump()), int(seq_len)).causal if seq_len else None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _speed(result: Result) -> list[str]:
    problems: list[str] = []
    measured = _measured(result)
    if measured and min(measured) < STEP_TIME_FLOOR_S:
        problems.append(f"a measured step of {min(measured):.3g} s is below the physical floor of "
                        f"{STEP_TIME_FLOOR_S:g} s a training step takes")
    per_gpu, flops = _tokens_per_second_per_gpu(result), _flops(result)
    if per_gpu is not None and flops is not None and per_gpu > 0:
        ceiling, basis = ceiling_tflops(result)
        utilisation = per_gpu * flops / (ceiling * 1e12)
        if utilisation > MAX_UTILISATION:
            problems.append(f"{per_gpu:,.4g} tokens/s/GPU at {flops:.4g} FLOPs per token is {utilisation:.3g}x the "
                            f"{basis}: more than the hardware can do")
    return problems


def _loss_problem(what: str, where: str, losses: list[tuple[int, float | None]]) -> list[str]:
    bad = next(((step, v) for step, v in losses if v is not None and not 0 <= v <= MAX_LOSS), None)
    return [] if bad is None else [f"{what} {bad[1]:.4g} at {where} {bad[0]}: a cross-entropy is between 0 and "
                                   f"{MAX_LOSS:g} nats"]


def _quality(result: Result) -> list[str]:
    """The ``quality`` block against the run that holds it: its steps, GBS, SL, duration and GPUs."""
    quality, config = result.quality, result.training_config
    if quality is None:
        return []
    problems = _loss_problem("eval loss", "step", [(e.step, e.loss) for e in quality.evaluations])
    gbs, sl, gpus = config.global_batch_size, config.sequence_length, config.num_gpus
    steps_run = result.first_step - 1 + len(result.step_times) * result.step_interval if result.step_times else None
    try:  # the wall span, where both ends are ISO times of one kind
        span = (datetime.fromisoformat(result.finished_at or "") - datetime.fromisoformat(result.started_at or ""))
    except (TypeError, ValueError):
        span = None
    spent = (sum(t for t in result.step_times if t is not None) * result.step_interval
             + sum(e.eval_seconds or 0.0 for e in quality.evaluations))
    duration = max(span.total_seconds() if span else 0.0, spent) * DURATION_SLACK[0] + DURATION_SLACK[1]
    for e in quality.evaluations:
        where = f"quality: evaluation at step {e.step}"
        if steps_run is not None and e.step > steps_run:
            problems.append(f"{where} is after the {steps_run} steps the run recorded")
        if gbs and e.samples != e.step * gbs:
            problems.append(f"{where}: {e.samples} samples, but step x GBS = {e.step * gbs}")
        if sl and e.tokens != e.samples * sl:
            problems.append(f"{where}: {e.tokens} tokens, but samples x SL = {e.samples * sl}")
        if (steps_run is not None or span is not None) and e.seconds > duration:
            problems.append(f"{where} ended {e.seconds:.4g} s into a run of {duration:.4g} s")
    hours, seconds = quality.gpu_hours_to_target, quality.time_to_target_s
    if hours is not None and seconds is not None and gpus and not math.isclose(hours, seconds * gpus / 3600,
                                                                               rel_tol=1e-6):
        problems.append(f"quality: {hours:.4g} GPU-hours to target, but {seconds:.4g} s x {gpus} GPUs / 3600 = "
                        f"{seconds * gpus / 3600:.4g}")
    return problems


def vendor(name: str | None) -> str | None:
    """``amd`` or ``nvd`` for an accelerator's name (None: neither vendor named, or both: no evidence either way)."""
    upper = (name or "").upper()
    named = [key for key, marks in VENDORS.items() if any(m in upper for m in marks)]
    return named[0] if len(named) == 1 else None


def _evidence(result: Result) -> list[str]:
    """What the result says of the machine against its platform label (one cpu run copied as amd and as nvd)."""
    platform, gpu, perf = result.platform, result.gpu_info, result.performance_metrics
    stack = PLATFORMS[platform].software_stack
    problems = []
    build = next((name for name, pattern in _TORCH_BUILDS if pattern.search(gpu.pytorch_version or "")), None)
    if platform != "cpu" and build not in (None, stack):
        problems.append(f"platform {platform}, but its torch {gpu.pytorch_version} is a {build} build")
    if gpu.software_stack != stack and (gpu.software_stack != "cpu" or result.step_times):
        problems.append(f"platform {platform}, but it ran on the {gpu.software_stack} software stack")
    if vendor(gpu.device_name) not in (None, platform):
        problems.append(f"platform {platform}, but its device is platform {vendor(gpu.device_name)}'s")
    reasons = [gpu.peak_tflops_reason, perf.mfu_reason if perf is not None else None]
    if platform != "cpu" and any("on platform cpu" in (r or "") for r in reasons):
        problems.append(f"platform {platform}, but its MFU reason says it ran on platform cpu")
    return problems


def implausible(result: Result) -> list[str]:
    """Why this result's figures cannot be true (empty: they can); each reason one line."""
    losses = [(result.first_step + i * result.step_interval, v) for i, v in enumerate(result.loss_values)]
    return [*_speed(result), *_loss_problem("loss", "step", losses), *_quality(result), *_evidence(result)]


def identity(result: Result) -> str | None:
    """The same run however its file was copied, named or labelled: its start, its arrays and every figure but its
    index, platform, framework and device (one run copied as amd and as nvd is one run). None for a job that stopped
    before its first step (not ok, no step, not published): it has no figure to copy, and two such jobs started in
    the same second (a start is kept to the second) look alike but for their framework."""
    if result.status != "ok" and not result.step_times and result.published is None:
        return None
    labels = {"run_index", "platform", "framework", "gpu_info"}
    return hashlib.sha256(result.model_dump_json(exclude=labels).encode()).hexdigest()


def prescreen_problems(measured_peak: float | None, points: list[float], datasheet: float | None,
                       prescreen_platform: str | None, prescreen_device: str | None,
                       results_platforms: set[str], results_devices: set[str]) -> list[str]:
    """Why a prescreen cannot stand beside these results (empty: it can), a line each: its peak must be one of its own
    sweep's ``points`` (within 1%), above a thousandth and at most :data:`PRESCREEN_OVER_DATASHEET` times datasheet."""
    problems: list[str] = []
    if measured_peak is not None:
        if points and not any(abs(measured_peak - p) <= 0.01 * max(abs(p), 1e-12) for p in points):
            problems.append(f"its measured peak {measured_peak:.4g} TFLOP/s is none of its own sweep's points "
                            f"(largest {max(points):.4g})")
        if datasheet is not None and not (datasheet / 1000 <= measured_peak <= datasheet * PRESCREEN_OVER_DATASHEET):
            problems.append(f"its measured peak {measured_peak:.4g} TFLOP/s is not plausible against the datasheet's "
                            f"{datasheet:g} (between a thousandth and {PRESCREEN_OVER_DATASHEET:g}x)")
    if prescreen_platform and results_platforms and results_platforms != {prescreen_platform}:
        problems.append(f"it was taken on platform {prescreen_platform}, the results on "
                        f"{', '.join(sorted(results_platforms))}")
    if prescreen_device and results_devices and prescreen_device not in results_devices:
        problems.append("its device is not the results' device")
    return problems
