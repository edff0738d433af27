"""The GPU check as text: the console table and ``gpu_check.md`` from the same rows and cells.

A figure that is not there is ``n/a`` in the table, with its reason listed under it.
"""

from __future__ import annotations

from evaluate.gpu_check.model import GpuCheck, Row
from evaluate.render.tables import console_table, markdown_table
from utils.machine.prescreen import WARN_FRACTION, clock_words
from utils.spec.registry import display_name

HEADERS = ("framework", "status", "tokens/s", "MFU datasheet", "MFU measured peak", "peak mem GB", "estimate GB",
           "energy kWh", "tokens/kWh", "losses 1, 2", "loss gap", "step s tprimat", "framework's own", "gap to ours")


def losses_text(row: Row) -> str | None:
    return ", ".join("n/a" if v is None else f"{v:.3f}" for v in row.first_losses) or None


def _pct(value: float | None) -> str | None:
    return None if value is None else f"{value:.1%}"


def cells(row: Row) -> list[object]:
    name = row.framework if row.implementation is None else f"{row.framework} [{row.implementation}]"
    return [name, row.status, None if row.tokens_per_second is None else f"{row.tokens_per_second:,.0f}",
            _pct(row.mfu_datasheet), _pct(row.mfu_measured_peak),
            None if row.peak_memory_gb is None else f"{row.peak_memory_gb:.1f}",
            None if row.memory_estimate_gb is None else f"{row.memory_estimate_gb:.1f}",
            None if row.energy_kwh is None else f"{row.energy_kwh:.4f}",
            None if row.tokens_per_kwh is None else f"{row.tokens_per_kwh:,.0f}", losses_text(row), _pct(row.loss_gap),
            None if row.step_time_s is None else f"{row.step_time_s:.3f}", _framework_figure(row),
            None if row.framework_gap is None else
            f"{row.framework_gap:.1%} ({row.framework_gap_metric})" + (" FLAGGED" if row.framework_flagged else "")]


def _framework_figure(row: Row) -> str | None:
    """The framework's own step time, or its own TFLOP/s where its step time is what tprimat read (a log)."""
    if row.framework_step_time_s is not None:
        return f"{row.framework_step_time_s:.3f} s"
    return None if row.framework_tflops_per_gpu is None else f"{row.framework_tflops_per_gpu:.1f} TFLOP/s"


def prescreen_lines(check: GpuCheck) -> list[str]:
    record = check.prescreen
    if record is None:
        return [f"prescreen: none ({check.prescreen_reason})"]
    gemm, copy = record.gemm, record.copy_bandwidth
    facts = ", ".join(f"{name} {fact.value}" for name, fact in record.facts.items() if fact.value is not None)
    unread = ", ".join(f"{name} ({fact.reason})" for name, fact in record.facts.items() if fact.value is None)
    lines = [f"device: {record.device_name}",
             f"GEMM bf16 peak: {gemm.measured_peak_tflops or 0:,.1f} TFLOP/s measured (n={gemm.best_n}) against "
             + (f"{gemm.datasheet_tflops:,.1f} datasheet = {gemm.fraction_of_datasheet:.1%}"
                if gemm.fraction_of_datasheet is not None else f"no datasheet figure ({gemm.reason})"),
             f"copy bandwidth: {copy.measured_tbs:.2f} TB/s measured against "
             + (f"{copy.datasheet_tbs:.2f} datasheet = {copy.fraction_of_datasheet:.1%}"
                if copy.fraction_of_datasheet is not None else f"no datasheet figure ({copy.reason})"),
             f"facts: {facts or 'none read'}"]
    if unread:
        lines.append(f"not read: {unread}")
    low = gemm.fraction_of_datasheet is not None and gemm.fraction_of_datasheet < WARN_FRACTION
    if record.clocks is not None and low:
        lines.append(f"clocks during the sweep: {clock_words(record.clocks)}")
    lines += record.notes
    return lines


def note_lines(check: GpuCheck) -> list[str]:
    return [*(f"{row.framework} {what}: n/a because {why}" for row in check.rows for what, why in row.missing.items()),
            *(f"skipped result: {reason}" for reason in check.skipped)]


def _intro(check: GpuCheck) -> str:
    reference = f"; loss gap against {check.loss_reference}" if check.loss_reference else ""
    return (f"GPU check on {display_name('platform', check.platform)}: {check.workload}. MFU with full attention"
            f"{reference}; gap to ours: the framework's own printed figure against tprimat's (flagged over 5%).")


def render_markdown(check: GpuCheck) -> str:
    parts = ["# GPU check", "", _intro(check), "", "## Prescreen", "",
             *[f"- {line}" for line in prescreen_lines(check)],
             "", "## Frameworks", "", markdown_table(HEADERS, [cells(r) for r in check.rows])]
    notes = note_lines(check)
    if notes:
        parts += ["", *[f"- {line}" for line in notes]]
    parts += ["", f"**Verdict: {check.verdict_line}**", ""]
    return "\n".join(parts)


def render_console(check: GpuCheck) -> str:
    lines = [_intro(check), *prescreen_lines(check), "", console_table(HEADERS, [cells(r) for r in check.rows])]
    lines += note_lines(check)
    lines.append(f"verdict: {check.verdict_line}")
    return "\n".join(lines)

