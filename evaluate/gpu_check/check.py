"""The GPU self-check's judgement: one row per framework of the platform, built from its results, and a verdict.

It only reads the results, their owners' figures and the prescreen; the one figure it forms is the MFU against the
measured GEMM peak. A missing figure is ``None`` with its reason.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from evaluate.analysis.fairness import TRANSFORMER_IMPL, check_fairness
from evaluate.analysis.results import LoadedResult, find_result_files, load_results
from evaluate.gpu_check.model import GpuCheck, Row, Verdict
from evaluate.gpu_check.render import losses_text
from utils.io.json_input import JsonInputError, read_json
from utils.io.sanitise import one_line, sanitised
from utils.machine.hardware import peak_tflops
from utils.machine.prescreen_record import Prescreen
from utils.measure.plausible import prescreen_problems
from utils.schema.model import Result
from utils.spec.models import get_shape, mfu
from utils.spec.registry import display_name, frameworks_on

LOSS_TOLERANCE = 0.02  # the first two losses of every framework within 2% of the reference's
FIRST_LOSSES = 2
MEMORY_TOLERANCE = 0.15  # a measured peak more than 15% over the pre-launch estimate is a degraded line
REFERENCE_FRAMEWORK = "tran"  # the vendor-neutral reference (docs/RUNNING.md)


def workload_label(result: Result) -> str:
    """``Llama 3.1 8B [8 of 32 layers]`` for a proxy that keeps the width and drops layers."""
    shape = result.model_shape
    try:
        depth = get_shape(result.model, shape.size).num_layers
    except ValueError:
        return shape.display_name
    label = f"[{shape.num_layers} of {depth} layers]"
    if shape.num_layers == depth or shape.display_name.endswith(label):  # a proxy's shape may carry its label already
        return shape.display_name
    return f"{shape.display_name} {label}"


def _performance(row: Row, result: Result, measured_peak: float | None, peak_reason: str | None) -> None:
    perf = result.performance_metrics
    if perf is None:
        row.missing["performance"] = "the result has no performance block"
        return
    row.tokens_per_second = perf.tokens_per_second
    row.step_time_s = perf.median_step_time_seconds
    if perf.tokens_per_second is None:
        row.missing["tokens/s"] = perf.mfu_reason or "throughput not computed"
    row.mfu_datasheet = perf.mfu.full if perf.mfu else None
    if row.mfu_datasheet is None:
        row.missing["MFU datasheet"] = perf.mfu_reason or "MFU not computed"
    if perf.tokens_per_second_per_gpu is not None and perf.flops_per_token is not None and measured_peak:
        row.mfu_measured_peak = mfu(perf.tokens_per_second_per_gpu, perf.flops_per_token.full, measured_peak)
    else:
        row.missing["MFU measured peak"] = peak_reason or perf.mfu_reason or "throughput not computed"
    reported = perf.framework_reported
    if reported is None:
        row.missing["framework's own"] = "the framework prints no figure of its own: tprimat measures in-process"
        return
    row.framework_step_time_s, row.framework_tflops_per_gpu = reported.median_step_time_seconds, reported.tflops_per_gpu
    worst = max(reported.disagreements, key=lambda d: d.relative_gap, default=None)
    if worst is None:
        row.missing["gap to ours"] = f"{reported.source}: no figure comparable with ours"
        return
    row.framework_gap, row.framework_gap_metric = worst.relative_gap, worst.metric
    row.framework_flagged = reported.flagged


def _memory_and_energy(row: Row, result: Result) -> None:
    memory = result.memory_metrics
    if memory is not None:
        row.peak_memory_gb = memory.peak_allocated_gb if memory.peak_allocated_gb is not None \
            else memory.device_used_peak_gb
    if row.peak_memory_gb is None:
        row.missing["peak mem"] = (memory.reason if memory else None) or "the result has no memory block"
    if result.memory_estimate is not None:
        row.memory_estimate_gb = float(result.memory_estimate.peak_gb)
    else:
        row.missing["estimate"] = "no pre-launch memory estimate in this result (memory_estimate)"
    power = result.power_metrics
    if power is not None:
        row.energy_kwh, row.tokens_per_kwh = power.energy_kwh, power.tokens_per_kwh
        row.avg_power_w_per_gpu = power.avg_power_w_per_gpu
    if row.energy_kwh is None or row.tokens_per_kwh is None:
        row.missing["energy"] = (power.reason if power else None) or "the result has no power block"


def framework_row(framework: str, loaded: LoadedResult | None, measured_peak: float | None,
                  peak_reason: str | None) -> Row:
    row = Row(framework=framework, name=display_name("framework", framework), status="missing")
    if loaded is None:
        row.error = "no result: the job did not start or wrote none"
        return row
    result = loaded.result
    row.status, row.error, row.result_file = result.status, result.error, str(loaded.path)
    row.first_losses = list(result.loss_values[:FIRST_LOSSES])
    if result.effective_settings is not None:
        impl = result.effective_settings.settings.get(TRANSFORMER_IMPL)
        row.implementation = None if impl is None else str(impl)
    _performance(row, result, measured_peak, peak_reason)
    _memory_and_energy(row, result)
    return row


def loss_gaps(rows: list[Row]) -> str | None:
    """Set each ok row's ``loss_gap`` (largest relative gap of its first losses to the reference's); the reference."""
    usable = [r for r in rows if r.status == "ok" and len(r.first_losses) == FIRST_LOSSES
              and all(v is not None for v in r.first_losses)]
    reference = next((r for r in usable if r.framework == REFERENCE_FRAMEWORK), usable[0] if usable else None)
    for row in rows:
        if row.status != "ok":
            continue
        if reference is None or row not in usable:
            row.missing["loss gap"] = (f"fewer than {FIRST_LOSSES} finite first losses" if row not in usable
                                       else "no framework has two finite first losses to compare with")
            continue
        gaps = [abs(ours - ref) / abs(ref) for ours, ref in zip(row.first_losses, reference.first_losses, strict=True)
                if ours is not None and ref]
        if gaps:
            row.loss_gap = max(gaps)
        else:
            row.missing["loss gap"] = f"{reference.framework}'s first losses are zero: no relative gap"
    return reference.framework if reference else None


def judge(rows: list[Row], prescreen: Prescreen | None, prescreen_reason: str | None, reference: str | None,
          unlike: list[str]) -> tuple[list[str], list[str]]:
    """(degraded lines, broken lines)."""
    broken = [f"{r.framework}: {r.status}: {r.error}" for r in rows if r.status != "ok"]
    degraded = list(prescreen.warnings) if prescreen else [f"no prescreen: {prescreen_reason}"]
    for row in rows:
        if row.loss_gap is not None and row.loss_gap > LOSS_TOLERANCE:
            degraded.append(f"first losses: {row.framework} {losses_text(row)} are {row.loss_gap:.1%} from "
                            f"{reference}'s (tolerance {LOSS_TOLERANCE:.0%})")
        if row.framework_flagged:
            degraded.append(f"framework's own figures: {row.framework}'s {row.framework_gap_metric} is "
                            f"{row.framework_gap:.1%} from tprimat's (over 5%)")
        estimate, peak = row.memory_estimate_gb, row.peak_memory_gb
        if estimate and peak is not None and peak > estimate * (1 + MEMORY_TOLERANCE):
            degraded.append(f"memory: {row.framework} peaked at {peak:.1f} GB, over its estimate of {estimate:.1f} GB "
                            f"by more than {MEMORY_TOLERANCE:.0%}")
    degraded += [f"not like-for-like: {line}" for line in unlike]
    return degraded, broken


def verdict_of(degraded: list[str], broken: list[str], capped_w: float | None = None) -> tuple[Verdict, str]:
    """The verdict and its line; ``capped_w``: the prescreen found the GEMM peak held down by the power cap."""
    if broken:
        return "broken", "broken: " + "; ".join(broken)
    if degraded:
        return "degraded", "degraded: " + "; ".join(degraded)
    if capped_w is not None:
        return "ready", (f"ready, power-capped at {capped_w:,.0f} W: every framework trained, the first losses agree "
                         "and the device is near its datasheet at its maximum clock (the prescreen's clock line)")
    return "ready", "ready: every framework trained, the first losses agree and the device is near its datasheet"


def build_check(results_dir: Path, platform: str, model: str, prescreen_path: Path | None,
                frameworks: tuple[str, ...] | None = None) -> GpuCheck:
    """Read the check's results and prescreen and judge them; ``frameworks`` (default: the platform's) without a
    result are broken lines."""
    prescreen, prescreen_reason = read_prescreen(prescreen_path)
    loaded = load_results(find_result_files(results_dir))
    prescreen, prescreen_reason = _plausible_prescreen(prescreen, prescreen_reason, loaded.results)
    ours = [r for r in loaded.results if r.platform == platform and r.result.model == model]  # the key, not a label
    by_framework: dict[str, LoadedResult] = {}
    for item in sorted(ours, key=lambda r: (r.run_index or 0, r.path.name)):
        by_framework.setdefault(item.framework, item)
    measured = prescreen.gemm.measured_peak_tflops if prescreen else None
    peak_reason = None if measured else f"no measured GEMM peak ({prescreen_reason or 'the sweep gave none'})"
    expected = frameworks or frameworks_on(platform)
    rows = [framework_row(fw, by_framework.get(fw), measured, peak_reason) for fw in expected]
    reference = loss_gaps(rows)
    unlike = [d.describe() for d in check_fairness(by_framework.values()).differences]
    degraded, broken = judge(rows, prescreen, prescreen_reason, reference, unlike)
    verdict, line = verdict_of(degraded, broken, prescreen.power_capped_w if prescreen else None)
    labels = {workload_label(item.result) for item in by_framework.values()}
    return GpuCheck(platform=platform, model=model, workload=", ".join(sorted(labels)) or display_name("model", model),
                    prescreen=prescreen, prescreen_reason=prescreen_reason, loss_reference=reference, rows=rows,
                    skipped=[reason for _, reason in loaded.skipped], degraded=degraded, broken=broken,
                    verdict=verdict, verdict_line=line)


PRESCREEN_MAX_BYTES = 1 << 20  # a prescreen record is a few kB: a bigger file is no prescreen


def read_prescreen(path: Path | None) -> tuple[Prescreen | None, str | None]:
    """The prescreen record, read as foreign input: a regular file, bounded (``utils/io/json_input.py``: no FIFO or
    ``/dev/zero`` hangs the check), strictly typed."""
    if path is None:
        return None, "not run"
    shown = one_line(path, 400)
    if not Path(path).exists():
        return None, f"{shown} does not exist (the prescreen did not finish)"
    try:
        return sanitised(Prescreen.model_validate(read_json(path, max_bytes=PRESCREEN_MAX_BYTES))), None
    except JsonInputError as exc:
        return None, one_line(exc, 600)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = "/".join(one_line(part, 60) for part in first["loc"]) or "(top level)"
        return None, f"{shown}: {where}: {one_line(first['msg'], 300)}"


def _plausible_prescreen(prescreen: Prescreen | None, reason: str | None,
                         results: list[LoadedResult]) -> tuple[Prescreen | None, str | None]:
    """The prescreen when its figures and its device can stand beside these results; else None and why
    (``utils/measure/plausible.py``: an absurd peak or another device's prescreen never gives "ready")."""
    if prescreen is None:
        return None, reason
    datasheet, _ = peak_tflops(prescreen.device_name, "bf16")
    problems = prescreen_problems(prescreen.gemm.measured_peak_tflops, [p.tflops for p in prescreen.gemm.points],
                                  datasheet, prescreen.platform, prescreen.device_name,
                                  {r.platform for r in results},
                                  {r.result.gpu_info.device_name for r in results if r.result.gpu_info.device_name})
    if problems:
        return None, "not plausible, left out: " + one_line("; ".join(problems), 600)
    return prescreen, None
