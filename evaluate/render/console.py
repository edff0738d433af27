"""The comparison on the console: the verdicts, then per model its table and one line per note, reference, ratio
and parity; the cells are evaluate/render/rows.py's, as ``compare.md``'s (the reasons for missing values listed
apart, not in the cells)."""

from __future__ import annotations

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.convergence import overall
from evaluate.analysis.summary import model_title
from evaluate.render.mlperf import console_lines as mlperf_console
from evaluate.render.mlperf import published_console
from evaluate.render.rows import (
    QUALITY_HEADERS,
    RESULT_HEADERS,
    convergence_rows,
    framework_rows,
    not_reached_rows,
    parity_rows,
    quality_rows,
    ratio_rows,
    reference_rows,
    result_rows,
    setting_text,
    settings_tables,
)
from evaluate.render.tables import console_table
from utils.spec.registry import display_name


def console(comparison: Comparison) -> str:
    lines = []
    if not comparison.fairness.fair:
        lines.append("WARNING: workloads differ; compared anyway (--allow-mismatch)")
    if not comparison.converged:
        lines.append("WARNING: NOT FAIR: the loss curves diverge (see convergence)")
    lines.append(f"fairness: {comparison.fairness.verdict()}")
    lines += [f"  - {d.describe()}" for d in comparison.fairness.differences]
    lines.append(f"convergence: {overall(comparison.convergence)}")
    lines += [f"  - {row[1]} vs {row[2]} ({row[0]}): {row[7]}" for row in convergence_rows(comparison.convergence)]
    lines += mlperf_console(comparison.runs) + published_console(comparison.published)
    for model, headers, rows in settings_tables(comparison.settings):
        lines += ["", f"effective settings that differ ({display_name('model', model)}):",
                  console_table(headers, rows)]
    own = sum(len(rows) for _, _, rows in settings_tables(comparison.settings, shared=False))
    if own:
        lines.append(f"  ({own} more setting(s) only some frameworks have: compare.md, collapsed)")
    for model in sorted(comparison.by_model):
        groups = comparison.by_model[model]
        title = model_title(model, groups)
        rows = result_rows(groups, comparison.prices, short=True)
        lines += ["", f"== {title} ==", console_table(RESULT_HEADERS, rows)]
        summaries = comparison.quality(model)
        if summaries:
            lines += ["time to quality:", console_table(QUALITY_HEADERS, quality_rows(summaries, comparison.prices,
                                                                                      short=True))]
            lines += [f"  not reached: {name} ({label}): {why}" for name, label, why in not_reached_rows(summaries)]
        notes = sorted({f"{what}: {reason}" for s in groups if s.group.ok_runs
                        for what, reason in (("MFU", s.mfu_reason), ("memory", s.memory_reason),
                                             ("power", s.power_reason)) if reason})
        lines += [f"  note: {note}" for note in notes]
        for row in reference_rows(groups):
            lines.append(f"  reference: {row[0]} vs {row[1]} ({row[3]} tokens/s/GPU): {row[5]}")
        for row in ratio_rows(comparison.ratios(model)):
            lines.append(f"  AMD/NVIDIA {row[1]} vs {row[2]}: {row[3]} ({row[4]})")
        best = comparison.best(model)
        if best is not None:
            row = ratio_rows([best.ratio])[0]
            lines.append(f"  AMD/NVIDIA best vs best (tuned) {row[1]} vs {row[2]}: {row[3]} ({row[4]})")
            lines += [f"    {d.key}: {setting_text(d.first)} vs {setting_text(d.second)}" for d in best.differences]
        for row in parity_rows(comparison.parities(model)):
            detail = row[5] or f"correlation {row[3]}, max relative gap {row[4]} over {row[2]} steps"
            lines.append(f"  loss parity {row[0]} vs {row[1]}: {detail}")
        if comparison.single_platform:
            lines += ["", console_table(["framework", "status", "tokens/s/GPU", "avg step (s)", "final loss",
                                         "total step time"], framework_rows(groups))]
    return "\n".join(lines)
