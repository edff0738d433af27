"""The comparison figures, built as matplotlib ``Figure`` objects (Agg, no display needed).

``comparison_figure`` has six panels: throughput per GPU (with 95% intervals over
repeated runs and the matching published reference), training loss, step time per
step, average step time, peak memory and MFU under both FLOP conventions.
``loss_parity_figure`` overlays the loss curves of two platforms on identical data
and plots their relative gap. Building figures in functions that return them lets
tests inspect axes titles rather than just a file's existence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

from evaluate.analysis import GroupSummary, LossParity
from evaluate.stats import Estimate
from utils.atomic import atomic_path
from utils.registry import display_name
from utils.result_model import Result

PLATFORM_COLORS = {"amd": "#d62728", "nvd": "#76b900", "cpu": "#7f7f7f"}
FRAMEWORK_HATCHES = {"mega": "", "prim": "//", "nemo": "..", "tran": "xx", "deep": "++"}
FRAMEWORK_MARKERS = {"mega": "o", "prim": "s", "nemo": "^", "tran": "D", "deep": "v"}
MODEL_STYLES = {"llama": "-", "qwen": "--", "mistral": ":"}

TITLE_THROUGHPUT = "Throughput per GPU (tokens/s/GPU, higher is better)"
TITLE_LOSS = "Training loss"
TITLE_STEP_TRACE = "Step time per step"
TITLE_AVG_STEP = "Average step time (s, lower is better)"
TITLE_MEMORY = "Peak memory per GPU (GiB)"
TITLE_MFU = "MFU (%), full vs causal FLOP convention"
PANEL_TITLES = (TITLE_THROUGHPUT, TITLE_LOSS, TITLE_STEP_TRACE, TITLE_AVG_STEP, TITLE_MEMORY, TITLE_MFU)


def _label(summary: GroupSummary, with_model: bool) -> str:
    g = summary.group
    text = f"{display_name('platform', g.platform)} {g.framework}" + (" tuned" if g.profile == "tuned" else "")
    return f"{text}\n{g.model}" if with_model else text


def _color(summary: GroupSummary) -> str:
    return PLATFORM_COLORS.get(summary.group.platform, "#1f77b4")


def _yerr(estimates: list[Estimate | None]) -> list[list[float]] | None:
    if not any(e is not None and e.has_interval for e in estimates):
        return None
    low, high = [], []
    for e in estimates:
        if e is not None and e.has_interval:
            low.append(max(e.value - e.low, 0.0))  # type: ignore[operator]
            high.append(max(e.high - e.value, 0.0))  # type: ignore[operator]
        else:
            low.append(0.0)
            high.append(0.0)
    return [low, high]


def _bars(ax, summaries: list[GroupSummary], values: list[Estimate | None], labels: list[str], fmt: str,
          empty_text: str, scale: float = 1.0) -> None:
    """One bar per group, error bars where repeated runs give an interval, value printed on top."""
    if all(v is None for v in values):
        ax.text(0.5, 0.5, empty_text, ha="center", va="center", wrap=True, transform=ax.transAxes, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    xs = list(range(len(summaries)))
    heights = [(v.value * scale) if v is not None else 0.0 for v in values]
    scaled = [Estimate(v.value * scale, v.low * scale if v.low is not None else None,
                       v.high * scale if v.high is not None else None, v.n) if v is not None else None
              for v in values]
    bars = ax.bar(xs, heights, color=[_color(s) for s in summaries], edgecolor="black", linewidth=0.6,
                  yerr=_yerr(scaled), capsize=4)
    for bar, summary in zip(bars, summaries, strict=True):
        bar.set_hatch(FRAMEWORK_HATCHES.get(summary.group.framework, ""))
    top = max(heights) if heights else 0.0
    for x, value, summary in zip(xs, scaled, summaries, strict=True):
        if value is None:
            status = summary.group.status_text() or "no data"
            ax.text(x, top * 0.02, status, ha="center", va="bottom", rotation=90, fontsize=8, color="#444444")
        else:
            above = value.high if value.high is not None else value.value  # print above the whisker
            ax.text(x, max(above, value.value) + top * 0.02, fmt.format(value.value), ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(xs, labels, fontsize=8)
    highest = max([v.high for v in scaled if v is not None and v.high is not None] + [top])
    ax.set_ylim(0, highest * 1.18 if highest > 0 else 1)
    ax.grid(axis="y", alpha=0.3)


def _throughput_panel(ax, summaries: list[GroupSummary], labels: list[str]) -> None:
    _bars(ax, summaries, [s.tokens_per_gpu for s in summaries], labels, "{:,.0f}", "no completed runs")
    drew_reference = False
    for x, summary in enumerate(summaries):
        for match in summary.references:
            value = match.reference.tokens_per_second_per_gpu
            ax.hlines(value, x - 0.4, x + 0.4, colors="black", linestyles="--", linewidth=1.2,
                      label="published reference" if not drew_reference else None)
            if match.flagged:
                ax.text(x, value, "below half\nof reference", ha="center", va="bottom", fontsize=7, color="red")
            drew_reference = True
    if drew_reference:
        low, high = ax.get_ylim()
        tallest = max(m.reference.tokens_per_second_per_gpu for s in summaries for m in s.references)
        ax.set_ylim(low, max(high, tallest * 1.15))
        ax.legend(fontsize=8, loc="upper right")


def curve_points(summaries: list[GroupSummary], series: Callable[[Result], Sequence[float | None]],
                 ) -> Iterator[tuple[GroupSummary, list[int], list[float]]]:
    """(summary, 1-based steps, values) of each group's representative run; unmeasured steps left out.

    Shared by this module's curves and the per-platform framework figure (evaluate/frameworks.py).
    """
    for summary in summaries:
        run = summary.representative
        if run is None:
            continue
        values = series(run.result)
        ys = [v for v in values if v is not None]
        if ys:
            yield summary, [i + 1 for i, v in enumerate(values) if v is not None], ys


def _curves(ax, summaries: list[GroupSummary], series: Callable[[Result], Sequence[float | None]],
            ylabel: str) -> None:
    plotted = False
    for summary, steps, ys in curve_points(summaries, series):
        g = summary.group
        ax.plot(steps, ys, linestyle=MODEL_STYLES.get(g.model, "-"), color=_color(summary), linewidth=1.4,
                marker=FRAMEWORK_MARKERS.get(g.framework, "o"), markevery=max(1, len(ys) // 15), markersize=4,
                alpha=0.9,
                label=f"{display_name('platform', g.platform)} {g.framework} {g.model}"
                + (" tuned" if g.profile == "tuned" else ""))
        plotted = True
    if not plotted:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    skipped = max((s.representative.result.performance_metrics.skipped_steps for s in summaries
                   if s.representative is not None and s.representative.result.performance_metrics is not None),
                  default=0)
    if skipped:
        ax.axvspan(0.5, skipped + 0.5, color="#cccccc", alpha=0.4, label="warm-up (excluded from stats)")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _mfu_panel(ax, summaries: list[GroupSummary], labels: list[str]) -> None:
    if all(s.mfu_full is None for s in summaries):
        reasons = sorted({s.mfu_reason for s in summaries if s.mfu_reason})
        ax.text(0.5, 0.5, "MFU not available:\n" + "\n".join(reasons[:3]), ha="center", va="center",
                transform=ax.transAxes, fontsize=8, wrap=True)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    xs = list(range(len(summaries)))
    width = 0.38
    for offset, attr, alpha, name in ((-width / 2, "mfu_full", 1.0, "full attention"),
                                      (width / 2, "mfu_causal", 0.55, "causal-halved")):
        values = [getattr(s, attr) for s in summaries]
        heights = [v.value * 100 if v is not None else 0.0 for v in values]
        ax.bar([x + offset for x in xs], heights, width, color=[_color(s) for s in summaries], alpha=alpha,
               edgecolor="black", linewidth=0.6, label=name)
        for x, h, v in zip(xs, heights, values, strict=True):
            if v is not None:
                ax.text(x + offset, h, f"{h:.1f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(xs, labels, fontsize=8)
    ax.set_ylabel("% of peak dense FLOP/s")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def comparison_figure(by_model: dict[str, list[GroupSummary]]) -> Figure:
    """The six-panel comparison of every group of every model."""
    summaries = [s for model in sorted(by_model) for s in by_model[model]]
    with_model = len(by_model) > 1
    labels = [_label(s, with_model) for s in summaries]
    width = max(16.0, 1.3 * len(summaries) * 3)
    figure = Figure(figsize=(min(width, 30.0), 10.5), layout="constrained")
    axes = figure.subplots(2, 3)
    (ax_tps, ax_loss, ax_trace), (ax_avg, ax_mem, ax_mfu) = axes
    _throughput_panel(ax_tps, summaries, labels)
    ax_tps.set_ylabel("tokens/s/GPU")
    _curves(ax_loss, summaries, lambda r: r.loss_values, "loss")
    _curves(ax_trace, summaries, lambda r: r.step_times, "seconds")
    _bars(ax_avg, summaries, [s.avg_step_time for s in summaries], labels, "{:.3g}", "no completed runs")
    ax_avg.set_ylabel("seconds")
    reasons = sorted({s.memory_reason for s in summaries if s.memory_reason})
    _bars(ax_mem, summaries, [s.peak_memory_gb for s in summaries], labels, "{:.1f}",
          "memory not measured:\n" + "\n".join(reasons[:3]))
    ax_mem.set_ylabel("GiB")
    _mfu_panel(ax_mfu, summaries, labels)
    for ax, title in zip(axes.flat, PANEL_TITLES, strict=True):
        ax.set_title(title, fontsize=11)
    models = ", ".join(display_name("model", m) for m in sorted(by_model))
    runs = sum(len(s.group.runs) for s in summaries)
    figure.suptitle(f"tprimat comparison: {models} ({runs} result files; bars = median, whiskers = 95% interval "
                    "over repeated runs)", fontsize=13)
    return figure


def loss_parity_figure(parities: list[LossParity]) -> Figure:
    """One row per platform pair: both loss curves, and their relative gap per step."""
    shown = [p for p in parities if p.reason is None]
    rows = max(len(shown), 1)
    figure = Figure(figsize=(14, 3.8 * rows), layout="constrained")
    axes = figure.subplots(rows, 2, squeeze=False)
    if not shown:
        for ax in axes[0]:
            ax.text(0.5, 0.5, "no platform pair trained on identical data", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_title("Loss parity")
        return figure
    for (ax_curve, ax_gap), parity in zip(axes, shown, strict=True):
        a, b = parity.first, parity.second
        model = display_name("model", a.group.model)
        xs_a = a.representative.result.loss_values  # type: ignore[union-attr]
        xs_b = b.representative.result.loss_values  # type: ignore[union-attr]
        for summary, values, style in ((a, xs_a, "-"), (b, xs_b, "--")):
            steps = [i + 1 for i, v in enumerate(values) if v is not None]
            ax_curve.plot(steps, [v for v in values if v is not None], color=_color(summary), linewidth=1.6,
                          linestyle=style, label=_label(summary, False).replace("\n", " "))
        pair = f"{_label(a, False)} vs {_label(b, False)}"
        ax_curve.set_title(f"Loss parity: {model}, {pair}")
        ax_curve.set_xlabel("step")
        ax_curve.set_ylabel("loss")
        ax_curve.grid(alpha=0.3)
        ax_curve.legend(fontsize=8)
        gaps = [(i + 1, abs(x - y) / abs(y) * 100) for i, (x, y) in enumerate(zip(xs_a, xs_b, strict=False))
                if x is not None and y is not None and y != 0]
        ax_gap.plot([g[0] for g in gaps], [g[1] for g in gaps], color="#1f77b4", linewidth=1.2)
        corr = f"{parity.correlation:.4f}" if parity.correlation is not None else "n/a"
        gap = f"{parity.max_relative_gap:.2%}" if parity.max_relative_gap is not None else "n/a"
        ax_gap.set_title(f"Relative loss gap: {model} (correlation {corr}, max gap {gap})")
        ax_gap.set_xlabel("step")
        ax_gap.set_ylabel("|a - b| / |b| (%)")
        ax_gap.grid(alpha=0.3)
    figure.suptitle("Loss-curve parity between platforms on identical data", fontsize=13)
    return figure


def save_figure(figure: Any, path: Path, dpi: int = 110) -> Path:
    """``figure.savefig`` atomically: a half-written PNG never replaces a good one."""
    path = Path(path)
    with atomic_path(path, suffix=path.suffix) as tmp:
        figure.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png", bbox_inches="tight")
    return path
