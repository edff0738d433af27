"""The launcher's energy measurement of a job, for every framework: one code path for all five.

The launcher samples its node's GPU energy counters around the child (``utils/measure/energy_trace.py``) and takes
the energy over the measured steps' window: the iteration lines' timestamps for Megatron and Primus, the window the
in-process trainers record (``power_metrics.window_start_unix``/``window_end_unix``). Its figures replace the
result's own when they hold energy; else the result's own, else the launcher's null with its reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from train.launch.context import RunContext
from train.logs.scan import iteration_times
from utils.measure.energy_trace import (
    CounterTrace,
    StepWindow,
    energy_between,
    megatron_window,
    monitor_window,
    open_trace,
    window_power_metrics,
)
from utils.measure.quality import with_energy
from utils.schema.model import Result

# The node's counter trace over a job's run, or (None, why there is none).
Energy = tuple[CounterTrace | None, str | None]


@contextlib.contextmanager
def energy_trace(ctx: RunContext) -> Iterator[Energy]:
    """The node's counter trace running for the duration of the block (or ``(None, reason)``)."""
    trace, reason = open_trace(ctx.platform, ctx.cfg.gpus_per_node)
    if trace is None:
        yield None, reason
        return
    with trace:
        yield trace, None


def measured_window(ctx: RunContext, result: Result) -> tuple[StepWindow | None, str | None]:
    """The measured steps' wall-clock window: the trainer's own, else the log's iteration timestamps."""
    perf, power = result.performance_metrics, result.power_metrics
    if perf is None or perf.measured_steps <= 0:
        return None, "no measured (post-warm-up) step: no window to measure energy on"
    if power is None or power.window_start_unix is None:
        if ctx.log_path is None or not ctx.log_path.is_file():
            return None, "no log and no trainer window: no window to measure energy on"
        logged = iteration_times(ctx.log_path)  # only the iteration lines: the collect has read the rest
        return megatron_window(logged, perf.skipped_steps)
    return monitor_window(power.window_start_unix, power.window_end_unix, perf.measured_steps)


def apply_energy(ctx: RunContext, result: Result, trace: CounterTrace | None, reason: str | None) -> None:
    """Put the launcher's energy over the measured window into ``result`` (see the module's rule)."""
    window, why = (None, reason) if trace is None else measured_window(ctx, result)
    gpus_total = result.training_config.num_gpus or ctx.cfg.world_size
    ours = window_power_metrics(trace, window, tokens_per_step=ctx.cfg.tokens_per_step, gpus_total=gpus_total,
                                reason=why)
    own = result.power_metrics
    if getattr(result, "quality", None) is not None:  # a result with evaluations (a Result always has the field)

        def between(start: float, end: float) -> tuple[float | None, str | None]:
            return energy_between(trace, start, end, gpus_total)  # type: ignore[arg-type]

        result.quality = with_energy(result.quality, platform=ctx.platform, gpus=gpus_total,
                                     energy=between if trace is not None else None,
                                     energy_reason=reason or "no energy trace")
    if ours.energy_j is None and own is not None and own.energy_j is not None:
        return
    if own is not None:
        ours = ours.model_copy(update={"window_start_unix": own.window_start_unix,
                                       "window_end_unix": own.window_end_unix})
    result.power_metrics = ours
