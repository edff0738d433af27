"""Which figures can be physically true: the one owner of plausibility bounds for results and prescreens.

Why (issue 33): a cpu result with every step time x1e-9 reported 11.5 trillion tokens/s/GPU, internally
consistent, so the schema and the consistency checks passed it; validate said VALID and compare ranked it first.
The same figures as an "H100" with ``mfu: null`` passed too, and gpu_check took a prescreen's
``measured_peak_tflops`` of 1e-300 for a ready GPU. Consistency is not plausibility: a figure must also fit
what the hardware can do. Here, recomputed from the result's own shape and workload (never from the figures
it claims about itself):

* the model FLOP utilisation from the shape's FLOPs per token (the causal convention, the smaller one: the
  lenient bound) and the measured tokens/s/GPU, against the device's datasheet peak
  (``utils/machine/hardware.py``), the fastest device in the table for a device it does not know, and
  :data:`CPU_CEILING_TFLOPS` on cpu: above 100% is refused;
* every measured step time at least :data:`STEP_TIME_FLOOR_S`;
* a prescreen's measured peak within its own points and the datasheet, and its platform and device those of
  the results it is set beside.

Readers use it: ``evaluate/analysis/results.py`` (compare, validate, gpu_check leave such a result out and say so),
``evaluate/analysis/validation.py``, ``evaluate/gpu_check/check.py``.
"""

from __future__ import annotations

import hashlib
import math
import statistics

from utils.machine.hardware import PEAK_TFLOPS, peak_tflops
from utils.schema.model import Result
from utils.spec.models import ModelShape, flops_per_token

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


def step_time_problem(seconds: float | None) -> str | None:
    """Why a step time read from a foreign log or event file cannot be one (None: it can, or it is absent).

    Bound where the figure is read (issue 33: a negative, 1e308, 1e38 or NaN step time ended
    ``evaluate.extract`` in a pydantic traceback): such a step is dropped with a counted warning.
    """
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


def implausible(result: Result) -> list[str]:
    """Why this result's figures cannot be true (empty: they can); each reason one line."""
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


def identity(result: Result) -> str:
    """The same run however its file was copied or named: its start, its arrays and every figure but its index."""
    return hashlib.sha256(result.model_dump_json(exclude={"run_index"}).encode()).hexdigest()


def prescreen_problems(measured_peak: float | None, points: list[float], datasheet: float | None,
                       prescreen_platform: str | None, prescreen_device: str | None,
                       results_platforms: set[str], results_devices: set[str]) -> list[str]:
    """Why a prescreen cannot stand beside these results (empty: it can); each reason one line.

    ``points``: the TFLOP/s of the prescreen's own sweep; its peak must be one of them (within 1%) and, with
    the datasheet known, no more than :data:`PRESCREEN_OVER_DATASHEET` times it and above a thousandth of it.
    """
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
