"""The per-platform framework comparison: every framework of one platform side by side.

Per platform ``compare_<platform>_frameworks.png`` and console tables per model with the winners, from the same
summaries as the cross-vendor report; a failed framework is listed, never a zero bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from evaluate.analysis.results import platform_rank
from evaluate.analysis.summary import GroupSummary
from evaluate.render.mpl import Figure  # the Agg backend
from evaluate.render.plots import draw_curves, legend_label
from evaluate.render.tables import console_table
from utils.io.sanitise import one_line
from utils.result.names import frameworks_figure_name
from utils.schema.model import Result
from utils.spec.registry import FRAMEWORKS, MODELS, display_name, framework_color

MODEL_LINES = {key: model.line for key, model in MODELS.items()}  # the registry's model rows
MODEL_HATCHES = {key: model.hatch for key, model in MODELS.items()}

TITLE_THROUGHPUT = "Per-GPU throughput (tokens/s/GPU, higher is better)"
TITLE_LOSS = "Training loss convergence"
TITLE_STEP_TRACE = "Step duration over time"
TITLE_AVG_STEP = "Average step time (s, lower is better)"
PANEL_TITLES = (TITLE_THROUGHPUT, TITLE_LOSS, TITLE_STEP_TRACE, TITLE_AVG_STEP)
HEADERS = ("Framework", "Status", "Tokens/s/GPU", "Avg Step Time", "Final Loss", "Total Time")


def _order(summary: GroupSummary) -> tuple[int, int]:
    """Registry order: models (llama, qwen, mistral), then frameworks (mega, prim, nemo, tran, deep)."""
    frameworks, models = list(FRAMEWORKS), list(MODELS)
    g = summary.group
    return (models.index(g.model) if g.model in models else len(models),
            frameworks.index(g.framework) if g.framework in frameworks else len(frameworks))


def on_platform(by_model: dict[str, list[GroupSummary]], platform: str) -> list[GroupSummary]:
    """Every run group of ``platform``, every model, in registry order."""
    return sorted((s for groups in by_model.values() for s in groups if s.group.platform == platform), key=_order)


def _label(summary: GroupSummary) -> str:
    g = summary.group
    return f"{display_name('framework', g.framework)}\n{display_name('model', g.model)}"


def _bars(ax, summaries: list[GroupSummary], values: list[float | None], fmt: str) -> None:
    drawn = [(s, v) for s, v in zip(summaries, values, strict=True) if v is not None]
    if not drawn:
        ax.text(0.5, 0.5, "no completed runs", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        return
    xs = list(range(len(drawn)))
    bars = ax.bar(xs, [v for _, v in drawn], edgecolor="black", linewidth=0.6,
                  color=[framework_color(s.group.framework) for s, _ in drawn])
    for bar, (summary, value) in zip(bars, drawn, strict=True):
        bar.set_hatch(MODEL_HATCHES.get(summary.group.model, ""))
        ax.text(bar.get_x() + bar.get_width() / 2, value, fmt.format(value), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [_label(s) for s, _ in drawn], fontsize=8)
    ax.set_ylim(0, max(v for _, v in drawn) * 1.18)
    ax.grid(axis="y", alpha=0.3)


def _curves(ax, summaries: list[GroupSummary], series: Callable[[Result], Sequence[float | None]], ylabel: str) -> None:
    """The framework's colour, the model's line; the axis fits the measured steps (evaluate/render/plots.py)."""
    if draw_curves(ax, summaries, series, ylabel, label=lambda s: legend_label(s, with_model=True),
                   linestyle=lambda s: MODEL_LINES.get(s.group.model, "-"), marker=lambda s: None):
        ax.legend(fontsize=7)


def framework_figure(platform: str, summaries: list[GroupSummary]) -> Figure:
    """The 2x2 figure of one platform."""
    figure = Figure(figsize=(max(14.0, 1.2 * len(summaries) * 2), 10), layout="constrained")
    axes = figure.subplots(2, 2)
    (ax_tps, ax_loss), (ax_trace, ax_avg) = axes
    _bars(ax_tps, summaries, [s.tokens_per_gpu.value if s.tokens_per_gpu else None for s in summaries], "{:,.0f}")
    ax_tps.set_ylabel("tokens/s/GPU")
    _curves(ax_loss, summaries, lambda r: r.loss_values, "loss")
    _curves(ax_trace, summaries, lambda r: r.step_times, "seconds")
    _bars(ax_avg, summaries, [s.avg_step_time.value if s.avg_step_time else None for s in summaries], "{:.3g}")
    ax_avg.set_ylabel("seconds")
    for ax, title in zip(axes.flat, PANEL_TITLES, strict=True):
        ax.set_title(title, fontsize=11)
    figure.suptitle(f"{_hardware(summaries) or display_name('platform', platform)}: framework performance "
                    "comparison", fontsize=13)
    return figure


def _hardware(summaries: list[GroupSummary]) -> str | None:
    for summary in summaries:
        run = summary.representative or (summary.group.runs[0] if summary.group.runs else None)
        if run is not None:
            gpu = run.result.gpu_info
            return f"{display_name('platform', run.platform)} {one_line(gpu.device_name or gpu.cpu_name or '')}".strip()
    return None


def rows(summaries: list[GroupSummary]) -> list[list[str]]:
    """One row per framework: Tokens/s/GPU, Avg Step Time, Final Loss, Total Time (ok runs only)."""
    return [[display_name("framework", s.group.framework), s.group.status_text(),
             f"{s.tokens_per_gpu.value:,.1f}" if ok and s.tokens_per_gpu else "n/a",
             f"{s.avg_step_time.value:.3f}s" if ok and s.avg_step_time else "n/a",
             f"{s.final_loss:.4f}" if ok and s.final_loss is not None else "n/a",
             f"{s.step_time_total_s:,.1f}s" if ok and s.step_time_total_s is not None else "n/a"]
            for s, ok in ((s, bool(s.group.ok_runs)) for s in summaries)]


def summary_lines(summaries: list[GroupSummary]) -> list[str]:
    """Winners over every completed framework and model of the platform, and the spread of throughput."""
    done = [s for s in summaries if s.group.ok_runs and s.tokens_per_gpu and s.avg_step_time]
    if not done:
        return ["  no completed runs"]

    def name(s: GroupSummary) -> str:
        return f"{display_name('framework', s.group.framework)} {display_name('model', s.group.model)}"

    fastest = max(done, key=lambda s: s.tokens_per_gpu.value)
    quickest = min(done, key=lambda s: s.avg_step_time.value)
    lines = [f"  Highest throughput: {name(fastest)}: {fastest.tokens_per_gpu.value:,.1f} tokens/s/GPU",
             f"  Fastest step time: {name(quickest)}: {quickest.avg_step_time.value:.3f} seconds/step"]
    slowest = min(done, key=lambda s: s.tokens_per_gpu.value)
    if slowest is not fastest and slowest.tokens_per_gpu.value > 0:
        ratio = fastest.tokens_per_gpu.value / slowest.tokens_per_gpu.value
        lines.append(f"  Performance range: {ratio:.2f}x between {name(fastest)} and {name(slowest)}")
    return lines


def console_text(platform: str, summaries: list[GroupSummary]) -> str:
    """The console tables of one platform: hardware, one table per model, the summary of winners."""
    rule = "=" * 100
    lines = [rule, f"{display_name('platform', platform).upper()} - FRAMEWORK PERFORMANCE COMPARISON", rule]
    run = next((s.representative for s in summaries if s.representative is not None), None)
    if run is not None:
        gpu = run.result.gpu_info
        lines += [f"  Hardware: {one_line(gpu.device_name or gpu.cpu_name or 'n/a')}", f"  GPUs: {gpu.device_count}",
                  f"  PyTorch: {one_line(gpu.pytorch_version or 'n/a')}",
                  f"  Stack: {gpu.software_stack} {one_line(gpu.software_version or '')}".rstrip()]
    for model in dict.fromkeys(s.group.model for s in summaries):
        of_model = [s for s in summaries if s.group.model == model]
        lines += ["", "-" * 100, f"{display_name('model', model).upper()} COMPARISON", "-" * 100,
                  console_table(HEADERS, rows(of_model))]
    lines += ["", rule, "PERFORMANCE SUMMARY", rule, *summary_lines(summaries)]
    return "\n".join(lines)


def platforms_of(by_model: dict[str, list[GroupSummary]]) -> list[str]:
    return sorted({s.group.platform for groups in by_model.values() for s in groups}, key=platform_rank)


def platform_figures(by_model: dict[str, list[GroupSummary]]) -> list[tuple[str, Figure]]:
    """``(compare_<platform>_frameworks.png, figure)`` for every platform with results."""
    return [(frameworks_figure_name(platform), framework_figure(platform, on_platform(by_model, platform)))
            for platform in platforms_of(by_model)]


def console_all(by_model: dict[str, list[GroupSummary]]) -> str:
    return "\n\n".join(console_text(p, on_platform(by_model, p)) for p in platforms_of(by_model))
