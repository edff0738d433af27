"""The page's sections in reading order: verdict, one section per model, fairness, history and gate, evidence.

Built through ``markup.py`` only, so every foreign text is escaped; the table cells are evaluate/render/rows.py's,
so the page, ``compare.md`` and the console never disagree. A part with no data is one line saying why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.convergence import overall
from evaluate.analysis.fairness import SHAPE_KEY, Difference
from evaluate.analysis.published import View
from evaluate.analysis.stats import INTERVAL_METHOD, RATIO_METHOD, Estimate, estimate, ratio_estimate
from evaluate.analysis.summary import GroupSummary, fastest, model_title
from evaluate.render.mlperf import LEAD as PUBLISHED_LEAD
from evaluate.render.mlperf import published_tables
from evaluate.render.mlperf import title as published_title
from evaluate.render.plots import PLATFORM_MARKERS, left_out_panels, model_figure
from evaluate.render.quality_plot import model_quality_figure
from evaluate.render.rows import (
    CONVERGENCE_HEADERS,
    RESULT_HEADERS,
    all_ratio_rows,
    convergence_rows,
    failed_rows,
    parity_rows,
    result_rows,
    run_name,
    settings_tables,
)
from evaluate.render.tables import CELL_CHARS
from evaluate.report_html.database import Change, HistoryFacts
from evaluate.report_html.facts import TREND_SHOWN, PageFacts
from evaluate.report_html.markup import Markup, details, el, join, link, note, para, svg, table
from train.settings.rules import RULES, WHY
from utils.io.sanitise import one_line
from utils.schema.model import Result
from utils.schema.quality import Quality
from utils.spec.registry import display_name, framework_color

GLYPHS = {"o": "\u25cf", "s": "\u25a0", "^": "\u25b2"}  # the platform's marker in compare.png, as a character
MAX_EVIDENCE_ROWS = 1_000  # runs listed one by one; 10,000 results would make a page nobody reads
MAX_FACT_ROWS = 40

WORKLOAD_WHY = "a different workload: each side measured different work"


def anchor(model: str) -> str:
    """A section id from a model key or a proxy's label (``Llama 3.1 8B [8 of 32 layers]``): letters, digits, dashes."""
    return "model-" + re.sub(r"[^A-Za-z0-9]+", "-", model).strip("-")


def why(key: str) -> str:
    """Why a differing setting matters: its rule's (train/settings/rules.json), else the table's general reason."""
    return WHY[RULES[key].why if key in RULES else "configuration"]


def who(platform: str, framework: str, text: str) -> Markup:
    """A label with its framework's colour and its platform's marker, as the figures draw them."""
    glyph = GLYPHS.get(PLATFORM_MARKERS.get(platform, "o"), "\u25cf")
    return join([el("span", glyph, class_="key", style=f"color:{framework_color(framework)}"), " ", text])


def group_label(summary: GroupSummary) -> Markup:
    g = summary.group
    return who(g.platform, g.framework, run_name(g))


def _interval(value: Estimate) -> str:
    if not value.has_interval:
        return f"{value.value:.3f}x (one run on a side: no interval)"
    verdict = "the interval includes 1: no clear difference" if value.low <= 1 <= value.high else \
        "the 95% interval excludes 1"  # type: ignore[operator]
    return f"{value.value:.3f}x [95% {value.low:.3f}, {value.high:.3f}]: {verdict}"


def _ratio_line(title: str, a: GroupSummary, b: GroupSummary, what: str) -> Markup | None:
    value = ratio_estimate(a.per_run_tokens_per_gpu, b.per_run_tokens_per_gpu)
    if value is None:
        return None
    faster = a if value.value >= 1 else b
    return el("li", el("strong", title), ": ", group_label(a), " / ", group_label(b),
              f" tokens/s/GPU = {_interval(value)} ({what}); faster: ", group_label(faster))


def headline(comparison: Comparison) -> list[Markup]:
    """Per model: the AMD/NVIDIA ratio of the fastest of each (identical, else tuned), else one platform's best two."""
    lines = []
    for model in sorted(comparison.by_model):
        groups = comparison.by_model[model]
        title, line = model_title(model, groups), None
        for profile, what in (("identical", "identical configuration"), ("tuned", "each vendor's tuned recipe")):
            a, b = fastest(groups, "amd", profile), fastest(groups, "nvd", profile)
            if a is not None and b is not None:
                line = _ratio_line(title, a, b, f"AMD / NVIDIA, {what}")
                break
        if line is None:
            ranked = sorted((s for s in groups if s.tokens_per_gpu is not None),
                            key=lambda s: -s.tokens_per_gpu.value)  # type: ignore[union-attr]
            if len(ranked) >= 2:
                line = _ratio_line(title, ranked[0], ranked[1], "the fastest two of the compared groups")
            elif ranked:
                line = el("li", el("strong", title), ": one completed group, ",
                          group_label(ranked[0]), f", {ranked[0].tokens_per_gpu.format(1)} tokens/s/GPU")  # type: ignore[union-attr]
            else:
                line = el("li", el("strong", title), ": no completed run")
        lines.append(line)
    return lines


def verdict(facts: PageFacts) -> Markup:
    c = facts.comparison
    fair = c.fairness.fair and c.converged
    word = el("span", "FAIR" if fair else "NOT FAIR", class_="fair" if fair else "unfair")
    if fair and not c.fairness.compared:  # nothing completed: nothing was shown alike, nor unlike
        word = el("span", "NO VERDICT (no completed run to compare)", class_="unfair")
    elif fair and not c.fairness.checked:  # one result per model: nothing was shown alike either
        word = el("span", "NO VERDICT (one result per model: nothing compared)", class_="unfair")
    reasons = [] if fair else [el("li", d.describe()) for d in c.fairness.differences[:5]]
    if not c.converged:
        reasons.append(el("li", overall(c.convergence)))
    return el("section", el("h2", "Verdict: ", word, id="verdict"),
              para("Fairness: ", c.fairness.verdict(), ". Convergence: ", overall(c.convergence), "."),
              el("ul", *reasons) if reasons else Markup(""),
              el("ul", *headline(c), class_="headline"), class_="verdict")


def quality_part(model: str, groups: list[GroupSummary]) -> Markup:
    """Eval loss against time and tokens with the target (evaluate/render/quality_plot.py's drawing, as quality.png),
    when a run evaluated; else the one line that says evaluation was off."""
    blocks = [(s, s.representative.result.quality) for s in groups
              if s.representative is not None and s.representative.result.quality is not None]
    if not blocks:
        return note("Time to quality: evaluation off (EVAL_INTERVAL=0): no run of this model measured a held-out "
                    "loss.")
    figure = model_quality_figure(model, groups)
    return join([quality_table(blocks),  # type: ignore[arg-type]
                 svg(figure) if figure is not None else note("No eval-loss figure: no evaluation had a finite loss.")])


def _to_target(quality: Quality, name: str, pattern: str) -> str:
    value = getattr(quality, name)
    return pattern.format(value) if value is not None else f"n/a ({quality.null_reasons.get(name, 'not recorded')})"


def quality_table(blocks: list[tuple[GroupSummary, Quality]]) -> Markup:
    rows = []
    for summary, q in blocks:
        last = next((e for e in reversed(q.evaluations) if e.loss is not None), None)
        rows.append([group_label(summary), f"{q.target_loss:g}" if q.target_loss is not None else "none set",
                     "yes" + (" (stopped there)" if q.stopped_at_target else "") if q.reached else "no",
                     _to_target(q, "time_to_target_s", "{:,.1f} s"), _to_target(q, "tokens_to_target", "{:,.0f}"),
                     _to_target(q, "energy_to_target_kwh", "{:,.4f} kWh"),
                     _to_target(q, "gpu_hours_to_target", "{:,.3f} GPU-h"),
                     f"{len(q.evaluations)} ({q.eval_samples:,} samples each)",
                     f"{last.loss:.4f}" if last is not None else "n/a"])
    return table(["run", "target loss", "reached", "time to target", "tokens to target", "energy to target",
                  "GPU-hours to target", "evaluations", "last eval loss"], rows)


def energy_part(groups: list[GroupSummary]) -> Markup:
    """Board power and energy over the measured steps, per group (median over its ok runs), or why there is none."""
    rows = []
    for summary in groups:
        blocks = [r.result.power_metrics for r in summary.group.ok_runs if r.result.power_metrics is not None]
        power = estimate([b.avg_power_w_per_gpu for b in blocks if b.avg_power_w_per_gpu is not None])
        energy = estimate([b.energy_kwh for b in blocks if b.energy_kwh is not None])
        if power is None and energy is None:
            continue
        sources = ", ".join(sorted({b.energy_source for b in blocks}))
        rows.append([group_label(summary), power.format(0, unit=" W") if power else "n/a",
                     energy.format(4, unit=" kWh") if energy else "n/a",
                     summary.tokens_per_kwh.format(0) if summary.tokens_per_kwh else "n/a", sources])
    if not rows:
        reasons = sorted({s.power_reason for s in groups if s.power_reason})
        return note(f"Energy: not measured ({'; '.join(reasons[:3]) or 'no completed run'}).")
    return table(["run", "board power per GPU", "energy, measured steps", "tokens/kWh", "source"], rows)


def model_section(facts: PageFacts, model: str) -> Markup:
    c = facts.comparison
    groups = c.by_model[model]
    rows = result_rows(groups, c.prices)
    for row, summary in zip(rows, groups, strict=True):
        row[0] = group_label(summary)
    parts: list[Markup] = [el("h2", model_title(model, groups)), table(RESULT_HEADERS, rows)]
    if not c.prices:
        parts.append(note("Cost per 1T tokens: no --price-per-gpu-hour given."))
    figure = model_figure(groups, c.convergence_band)
    if figure is None:
        parts.append(note("No figure: no run of this model completed."))
    else:
        parts += [svg(figure), *(note(line) for line in left_out_panels(groups))]
    parts += [el("h3", "Energy"), energy_part(groups)]
    ratios = all_ratio_rows(c, model)
    if ratios:
        parts += [el("h3", "AMD / NVIDIA throughput ratio"),
                  table(["profile", "AMD", "NVIDIA", "ratio tokens/s/GPU [95% interval]", "verdict"], ratios)]
    failed = failed_rows(groups)
    if failed:
        parts += [el("h3", "Runs not counted (failed or incomplete)"), table(["file", "status", "reason"], failed)]
    parities = parity_rows(c.parities(model))
    if parities:
        parts += [el("h3", "Loss-curve parity between platforms"),
                  table(["first", "second", "steps", "correlation", "max relative gap", "note"], parities)]
    parts += [el("h3", "Time to quality"), quality_part(model, groups)]
    return el("section", *parts, id=anchor(model))


def _difference_row(d: Difference) -> list[str]:
    values = ", ".join(f"{label}={value}" for label, value in sorted(d.values.items()))
    reason = "not known, so it cannot prove the runs alike" if d.unverifiable else \
        "another model shape: different work" if d.key == SHAPE_KEY else WORKLOAD_WHY
    return [display_name("model", d.model), d.key, values, reason]


def fairness_section(facts: PageFacts) -> Markup:
    c = facts.comparison
    parts: list[Markup] = [el("h2", "Fairness"), para(c.fairness.verdict())]
    if c.fairness.differences:
        parts.append(table(["model", "key", "values", "why it matters"],
                           [_difference_row(d) for d in c.fairness.differences]))
    elif c.fairness.compared:
        parts.append(para("Workload and fingerprint checks: every compared result of a model ran the same workload "
                          "keys, data, tokenizer, model shape and FLOP convention."))
    if c.convergence:
        parts += [el("h3", "Convergence of the loss curves"),
                  table(CONVERGENCE_HEADERS, convergence_rows(c.convergence))]
    else:
        parts.append(note("Convergence: fewer than two completed results of one model, nothing to check."))
    shared = settings_tables(c.settings)
    parts.append(el("h3", "Effective settings that differ"))
    if not shared:
        parts.append(note("None: every setting the compared results all have is the same."))
    for model, headers, rows in shared:
        parts += [el("h4", display_name("model", model)),
                  table([*headers, "why it matters"], [[*row, why(row[0])] for row in rows])]
    own = settings_tables(c.settings, shared=False)
    if own:
        count = sum(len(rows) for _, _, rows in own)
        parts.append(details(f"{count} setting(s) only some of the compared frameworks have",
                             *(table(headers, rows) for _, headers, rows in own)))
    if c.skipped:
        parts += [el("h3", "Skipped files"),
                  table(["file", "reason"], [[path.name, facts.local(reason)] for path, reason in c.skipped])]
    return el("section", *parts, id="fairness")


def _trend_rows(history: HistoryFacts) -> list[list[str]]:
    rows = []
    for item in history.series:
        for i in range(max(0, len(item.ids) - TREND_SHOWN), len(item.ids)):
            tps, mfu, kwh = item.values[i]
            changes = item.changes.get(i, [])
            rows.append([item.label, f"#{item.ids[i]}", item.times[i][:16].replace("T", " "), item.statuses[i],
                         "-" if tps != tps else f"{tps:,.1f}", "-" if mfu != mfu else f"{100 * mfu:.1f}%",
                         "-" if kwh != kwh else f"{kwh:,.0f}",
                         "; ".join(changes[:4]) + (f"; +{len(changes) - 4} more" if len(changes) > 4 else "")])
    return rows


def history_section(facts: PageFacts) -> Markup:
    history = facts.history
    parts: list[Markup] = [el("h2", "History")]
    if history.absent:
        parts.append(note(history.absent))
    else:
        parts.append(para(f"{history.runs:,} run(s) in the results database; {len(history.series)} series of the "
                          "jobs compared here (the same job on the same kind of device)."))
        if history.trend_svg:
            parts.append(history.trend_svg)
        else:
            parts.append(note("No trend figure: no ok run of these jobs measured a figure."))
        if history.series:
            parts.append(table(["series", "run", "time (UTC)", "status", "tokens/s/GPU", "MFU", "tokens/kWh",
                                "changed since the run before"], _trend_rows(history)))
        parts += [el("h3", "What changed since the last run"), *(_change(c) for c in history.changes)]
    parts += [el("h3", "Regression gate"), gate_part(facts)]
    return el("section", *parts, id="history")


def _change(change: Change) -> Markup:
    if change.previous is None:
        return note(f"{change.label}: no earlier ok run of this job on this device in the database.")
    facts = [[d.key, d.first, d.second] for d in change.facts[:MAX_FACT_ROWS]]
    more = len(change.facts) - len(facts)
    return details(join([change.label, f" against run {change.previous}: {len(change.facts)} fact(s) differ"]),
                   table(["fact", "before", "now"], facts) if facts else note("Nothing recorded differs."),
                   note(f"and {more} more") if more > 0 else Markup(""),
                   el("pre", "\n".join(change.metrics)), open_=True)


def gate_part(facts: PageFacts) -> Markup:
    gate, report = facts.gate, facts.gate.report
    if gate.absent or report is None:
        return note(gate.absent or "no regression-gate report")
    rows = [[facts.local(c.candidate), check.metric, check.result, facts.local(check.line)]
            for c in report.candidates for check in c.checks]
    head = para(f"{one_line(gate.source, 200)}: ", el("strong", one_line(report.verdict, 80)),
                f" (exit {report.exit_code})",
                f": {one_line(facts.local(report.error), CELL_CHARS)}" if report.error else "")
    return join([head, table(["candidate", "check", "result", "line"], rows) if rows else note("No check recorded.")])


def _versions(result: Result) -> str:
    shown = result.framework_versions.model_dump(exclude={"unknown"}, exclude_none=True)
    return ", ".join(f"{k} {v}" for k, v in shown.items()) or "not recorded"


def evidence_section(facts: PageFacts) -> Markup:
    runs = facts.comparison.runs
    rows = []
    for run in runs[:MAX_EVIDENCE_ROWS]:
        r = run.result
        gpu, env = r.gpu_info, r.environment
        log = facts.logs.get(run.path)
        rows.append([link(facts.beside(run.path.name), run.label), r.status,
                     link(facts.beside(log)) if log else "no log in output/",
                     gpu.device_name or gpu.cpu_name or "n/a", str(gpu.device_count),
                     f"{gpu.software_stack} {gpu.software_version or ''}".strip(), gpu.driver_version or "n/a",
                     gpu.pytorch_version or "n/a", _versions(r),
                     (env.image.tag or "none") + (f" @{env.image.digest[:19]}" if env.image.digest else ""),
                     r.started_at or "n/a"])
    parts: list[Markup] = [el("h2", "Evidence"),
                           para("Hardware, software and image of every run, with its result file and log "
                                "(links relative to this page, inside the output folder)."),
                           table(["result", "status", "log", "device", "GPUs", "stack", "driver", "torch",
                                  "framework versions", "image", "started (UTC)"], rows)]
    if len(runs) > MAX_EVIDENCE_ROWS:
        parts.append(note(f"and {len(runs) - MAX_EVIDENCE_ROWS:,} more result file(s) in the output folder, not "
                          "listed one by one."))
    return el("section", *parts, id="evidence")


def method_section(comparison: Comparison) -> Markup:
    return el("section", el("h2", "Method"), el("ul", *(el("li", line) for line in (
        f"Repeated runs: {INTERVAL_METHOD}. Ratios: {RATIO_METHOD}.",
        "Failed and incomplete runs are listed, never averaged in.",
        "Throughput: GBS x SL / median step time over the measured (post-warm-up) steps, per GPU.",
        "MFU: achieved FLOP/s per GPU / the device's peak dense FLOP/s (full and causal-halved attention).",
        f"Convergence band: {comparison.convergence_band:.0%} of the final mean loss "
        "(evaluate/analysis/convergence.py).",
        "Colours: one per framework; markers: one per platform, as in compare.png."))), id="method")


def contents(models: dict[str, list[GroupSummary]], published: Iterable[View] = ()) -> Markup:
    items = [("verdict", "Verdict"), *((anchor(m), model_title(m, models[m])) for m in sorted(models)),
             ("fairness", "Fairness"), ("history", "History and gate"), ("evidence", "Evidence"), ("method", "Method"),
             *((published_anchor(v), f"MLPerf v{v.round} (published)") for v in published)]
    return el("nav", *(join([link(f"#{anchor}", text), " "]) for anchor, text in items))


def published_anchor(view: View) -> str:
    return anchor(f"mlperf {view.benchmark} {view.round}").replace("model-", "", 1)


def published_sections(comparison: Comparison) -> list[Markup]:
    """MLPerf's published runs, imported (evaluate/render/mlperf.py's tables, as compare.md's): the page's last."""
    return [el("section", el("h2", published_title(view)), para(PUBLISHED_LEAD),
               *(part for name, headers, rows in published_tables(view)
                 for part in (el("h3", name), table(headers, rows))),
               id=published_anchor(view)) for view in comparison.published]
