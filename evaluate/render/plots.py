"""The comparison figures, built as matplotlib ``Figure`` objects (Agg, no display needed).

One colour per framework (the registry's), one line style, marker and hatch per platform. Warm-up steps are drawn
and shaded but never set an axis; a panel no run measured is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from evaluate.analysis.convergence import DEFAULT_BAND, TAIL_FRACTION
from evaluate.analysis.stats import Estimate
from evaluate.analysis.summary import GroupSummary, LossParity, model_title
from evaluate.render.mpl import Figure  # the Agg backend
from utils.io.atomic import atomic_path
from utils.schema.model import Result
from utils.spec.registry import display_name, framework_color

PLATFORM_LINES = {"nvd": "-", "amd": "--", "cpu": ":"}
PLATFORM_MARKERS = {"nvd": "o", "amd": "s", "cpu": "^"}
PLATFORM_HATCHES = {"nvd": "", "amd": "//", "cpu": ".."}
MODEL_MARKERS = ("o", "D", "v", "P", "X", "*")  # a figure of several models: one marker per model
SEPARATOR = " \u00b7 "  # the middle dot of `nvd · mega`
WARMUP_COLOR = "#cccccc"
BAND_COLOR = "#888888"

TITLE_THROUGHPUT = "Throughput per GPU (tokens/s/GPU, higher is better)"
TITLE_LOSS = "Training loss"
TITLE_STEP_TRACE = "Step time per step"
TITLE_AVG_STEP = "Average step time (s, lower is better)"
TITLE_MEMORY = "Peak memory per GPU (GiB)"
TITLE_MFU = "MFU (%), full vs causal FLOP convention"
TITLE_ENERGY = "Tokens per kWh (board energy, higher is better)"
PANEL_TITLES = (TITLE_THROUGHPUT, TITLE_LOSS, TITLE_STEP_TRACE, TITLE_AVG_STEP, TITLE_MEMORY, TITLE_MFU)
ENERGY_PANEL_TITLES = (TITLE_THROUGHPUT, TITLE_LOSS, TITLE_STEP_TRACE, TITLE_ENERGY, TITLE_AVG_STEP, TITLE_MEMORY,
                       TITLE_MFU)


def legend_label(summary: GroupSummary, with_model: bool = False, newline: bool = False) -> str:
    """``nvd · mega`` (``· llama`` when several models share a panel, `` tuned`` for the tuned profile)."""
    g = summary.group
    text = SEPARATOR.join([g.platform, g.framework]) + (" tuned" if g.profile == "tuned" else "")
    if with_model:
        text += ("\n" if newline else SEPARATOR) + g.model
    return text


def _label(summary: GroupSummary, with_model: bool) -> str:
    return legend_label(summary, with_model, newline=True)


def _color(summary: GroupSummary) -> str:
    return framework_color(summary.group.framework)


def _yerr(estimates: list[Estimate | None]) -> list[list[float]] | None:
    if not any(e is not None and e.has_interval for e in estimates):
        return None
    shown = [e if e is not None and e.has_interval else None for e in estimates]
    return [[0.0 if e is None else max(e.value - e.low, 0.0) for e in shown],  # type: ignore[operator]
            [0.0 if e is None else max(e.high - e.value, 0.0) for e in shown]]  # type: ignore[operator]


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
        bar.set_hatch(PLATFORM_HATCHES.get(summary.group.platform, ""))
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
    """(summary, 1-based steps, values) of each group's representative run; unmeasured steps left out."""
    for summary in summaries:
        run = summary.representative
        if run is None:
            continue
        values = series(run.result)
        ys = [v for v in values if v is not None]
        if ys:
            yield summary, [i + 1 for i, v in enumerate(values) if v is not None], ys


def skipped_steps(summary: GroupSummary) -> int:
    """Warm-up steps of the group's plotted run (0 when it recorded none)."""
    run = summary.representative
    perf = run.result.performance_metrics if run is not None else None
    return perf.skipped_steps if perf is not None else 0


def fit_measured(ax, drawn: list[tuple[GroupSummary, list[int], list[float]]]) -> None:
    """y-limits from the measured steps only; the warm-up stays drawn, shaded, and labelled when off the scale."""
    skips = [skipped_steps(summary) for summary, _, _ in drawn]  # once per curve
    measured = [y for (_, steps, ys), s in zip(drawn, skips, strict=True) for x, y in zip(steps, ys, strict=True)
                if x > s]
    warmup = [y for (_, steps, ys), s in zip(drawn, skips, strict=True) for x, y in zip(steps, ys, strict=True)
              if x <= s]
    skip = max(skips, default=0)
    if skip:
        ax.axvspan(0.5, skip + 0.5, color=WARMUP_COLOR, alpha=0.4, label="warm-up (drawn, not in stats or axis)")
    if not measured:
        return
    low, high = min(measured), max(measured)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    ax.set_ylim(low - pad, high + pad)
    off = [y for y in warmup if y > high + pad or y < low - pad]
    if off:
        ax.text(skip / 2 + 0.5, high + pad * 0.5, f"warm-up off scale:\n{min(off):.3g} .. {max(off):.3g}",
                ha="center", va="top", fontsize=7, color="#444444")


def draw_curves(ax, summaries: list[GroupSummary], series: Callable[[Result], Sequence[float | None]],
                ylabel: str, *, label: Callable[[GroupSummary], str], linestyle: Callable[[GroupSummary], str],
                marker: Callable[[GroupSummary], str | None]) -> list[tuple[GroupSummary, list[int], list[float]]]:
    """One curve per group in its framework's colour; the axis fits the measured steps (:func:`fit_measured`)."""
    drawn = list(curve_points(summaries, series))
    for summary, steps, ys in drawn:
        ax.plot(steps, ys, linestyle=linestyle(summary), color=_color(summary), linewidth=1.4,
                marker=marker(summary), markevery=max(1, len(ys) // 15), markersize=4, alpha=0.9,
                label=label(summary))
    if not drawn:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return drawn
    fit_measured(ax, drawn)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return drawn


def _curves(ax, summaries: list[GroupSummary], series: Callable[[Result], Sequence[float | None]],
            ylabel: str, with_model: bool) -> list[tuple[GroupSummary, list[int], list[float]]]:
    """Platform by line style; by marker too, unless several models share the panel: then the marker is the
    model's (two models of one framework and platform would otherwise be one colour, one style, one marker)."""
    models = sorted({s.group.model for s in summaries})
    drawn = draw_curves(ax, summaries, series, ylabel, label=lambda s: legend_label(s, with_model),
                        linestyle=lambda s: PLATFORM_LINES.get(s.group.platform, "-"),
                        marker=lambda s: MODEL_MARKERS[models.index(s.group.model) % len(MODEL_MARKERS)]
                        if with_model else PLATFORM_MARKERS.get(s.group.platform, "o"))
    if drawn:
        ax.legend(fontsize=7)
    return drawn


def convergence_band(ax, drawn: list[tuple[GroupSummary, list[int], list[float]]], band: float) -> None:
    """Per model with two or more curves: the band the convergence check allows, ``band / 2`` either side of the
    median of the curves' mean loss over the last ``TAIL_FRACTION`` of the measured steps."""
    models = sorted({s.group.model for s, _, _ in drawn})
    for model in models:
        curves = [(s, steps, ys) for s, steps, ys in drawn if s.group.model == model]
        if len(curves) < 2:
            continue
        last = min(max(steps) for _, steps, _ in curves)
        first_measured = max(skipped_steps(s) for s, _, _ in curves) + 1
        tail = max(1, math.ceil((last - first_measured + 1) * TAIL_FRACTION))
        start = last - tail + 1
        means = [statistics.fmean(y for x, y in zip(steps, ys, strict=True) if start <= x <= last)
                 for _, steps, ys in curves if any(start <= x <= last for x in steps)]
        if len(means) < 2:
            continue
        center = statistics.median(means)
        ax.fill_between([start - 0.5, last + 0.5], center * (1 - band / 2), center * (1 + band / 2),
                        color=BAND_COLOR, alpha=0.25, linewidth=0,
                        label=f"convergence band: gap <= {band:.0%} over the last {TAIL_FRACTION:.0%}"
                        if model == models[0] else None)


def _mfu_panel(ax, summaries: list[GroupSummary], labels: list[str]) -> None:
    """Both FLOP conventions side by side; drawn only where a group has an MFU (:func:`panel_titles`)."""
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


def panel_titles(summaries: list[GroupSummary]) -> tuple[str, ...]:
    """The panels the comparison draws, in order: tokens per kWh, peak memory and MFU only where some group has
    the figure (no empty boxes; the tables say why)."""
    optional = {TITLE_ENERGY: any(s.tokens_per_kwh is not None for s in summaries),
                TITLE_MEMORY: any(s.peak_memory_gb is not None for s in summaries),
                TITLE_MFU: any(s.mfu_full is not None for s in summaries)}
    return tuple(t for t in ENERGY_PANEL_TITLES if optional.get(t, True))


def left_out_panels(summaries: list[GroupSummary]) -> list[str]:
    """One line per panel :func:`panel_titles` leaves out, saying why (the page prints them)."""
    shown = panel_titles(summaries)
    reasons = {TITLE_ENERGY: sorted({s.power_reason for s in summaries if s.power_reason}),
               TITLE_MEMORY: sorted({s.memory_reason for s in summaries if s.memory_reason}),
               TITLE_MFU: sorted({s.mfu_reason for s in summaries if s.mfu_reason})}
    return [f"{title}: left out, no run measured it ({'; '.join(why[:3]) or 'no data'})"
            for title, why in reasons.items() if title not in shown]


def comparison_figure(by_model: dict[str, list[GroupSummary]], band: float = DEFAULT_BAND) -> Figure:
    """The comparison of every group of every model: one panel per measured figure (:func:`panel_titles`)."""
    summaries = [s for model in sorted(by_model) for s in by_model[model]]
    with_model = len(by_model) > 1
    labels = [_label(s, with_model) for s in summaries]
    titles = panel_titles(summaries)
    columns = math.ceil(len(titles) / 2)
    width = max(16.0 if columns <= 3 else 21.0, 1.3 * len(summaries) * columns)  # the title fits on one line
    figure = Figure(figsize=(min(width, 34.0), 10.5), layout="constrained")
    grid = figure.subplots(2, columns, squeeze=False)
    flat = [ax for row in grid for ax in row]
    for spare in flat[len(titles):]:
        figure.delaxes(spare)
    axes = dict(zip(titles, flat, strict=False))
    _throughput_panel(axes[TITLE_THROUGHPUT], summaries, labels)
    axes[TITLE_THROUGHPUT].set_ylabel("tokens/s/GPU")
    drawn = _curves(axes[TITLE_LOSS], summaries, lambda r: r.loss_values, "loss", with_model)
    convergence_band(axes[TITLE_LOSS], drawn, band)
    if drawn:
        axes[TITLE_LOSS].legend(fontsize=7)
    _curves(axes[TITLE_STEP_TRACE], summaries, lambda r: r.step_times, "seconds", with_model)
    if TITLE_ENERGY in axes:
        _bars(axes[TITLE_ENERGY], summaries, [s.tokens_per_kwh for s in summaries], labels, "{:.3g}", "")
        axes[TITLE_ENERGY].set_ylabel("tokens/kWh")
    _bars(axes[TITLE_AVG_STEP], summaries, [s.avg_step_time for s in summaries], labels, "{:.3g}",
          "no completed runs")
    axes[TITLE_AVG_STEP].set_ylabel("seconds")
    if TITLE_MEMORY in axes:
        _bars(axes[TITLE_MEMORY], summaries, [s.peak_memory_gb for s in summaries], labels, "{:.1f}", "")
        axes[TITLE_MEMORY].set_ylabel("GiB")
    if TITLE_MFU in axes:
        _mfu_panel(axes[TITLE_MFU], summaries, labels)
    for title, ax in axes.items():
        ax.set_title(title, fontsize=11)
    models = ", ".join(model_title(m, by_model[m]) for m in sorted(by_model))
    runs = sum(len(s.group.runs) for s in summaries)
    figure.suptitle(f"tprimat comparison: {models} ({runs} result files; bars = median, whiskers = 95% interval "
                    "over repeated runs)", fontsize=13)
    return figure


def model_figure(summaries: list[GroupSummary], band: float = DEFAULT_BAND) -> Figure | None:
    """One model's throughput and loss curves side by side, for the page; None when no group completed a run."""
    if not any(s.representative is not None for s in summaries):
        return None
    labels = [_label(s, False) for s in summaries]
    # fixed margins, not the constrained layout: that measures every label again (a third of the page's time)
    figure = Figure(figsize=(max(10.0, 2.4 * len(summaries)), 3.9))
    figure.subplots_adjust(left=0.07, right=0.985, bottom=0.13, top=0.92, wspace=0.18)
    ax_tps, ax_loss = figure.subplots(1, 2)
    _throughput_panel(ax_tps, summaries, labels)
    ax_tps.set_ylabel("tokens/s/GPU")
    ax_tps.set_title(TITLE_THROUGHPUT, fontsize=10)
    drawn = _curves(ax_loss, summaries, lambda r: r.loss_values, "loss", False)
    convergence_band(ax_loss, drawn, band)
    if drawn:
        ax_loss.legend(fontsize=7)
    ax_loss.set_title(TITLE_LOSS, fontsize=10)
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
                          linestyle=style, label=legend_label(summary))
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
        # no bbox_inches="tight": the constrained layout fits every artist; "tight" draws each figure twice
        figure.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    return path
