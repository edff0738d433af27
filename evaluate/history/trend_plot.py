"""The trend's data and figure without the database: :class:`Series` and :func:`trend_figure` (``history trend``).

Split from ``trend.py`` (the queries, which load SQLAlchemy, 0.35 s of CPU) so that a process that only draws
the trend loads no SQLAlchemy: the report page reads the database in a second process and draws the series it
is sent (evaluate/report_html/background.py); ``trend.py`` re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from utils.io.atomic import atomic_path
from utils.io.sanitise import one_line

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure

METRICS = (("tokens_per_second_per_gpu", "tokens/s/GPU", 1.0, "{:,.0f}"), ("mfu", "MFU %", 100.0, "{:.1f}"),
           ("tokens_per_kwh", "tokens/kWh", 1.0, "{:,.0f}"))
MAX_POINTS = 1_000  # per series in the PNG: about one point per pixel of the 11-inch axis at 110 dpi
MAX_MARKS = 200  # version-change lines in the PNG


@dataclass
class Series:
    """One job on one kind of device over time, column by column (arrays: 100,000 runs are no 100,000 objects)."""

    key: tuple[str, str, str, str, str]
    ids: np.ndarray  # int64, run ids in time order
    times: np.ndarray  # str (normalised UTC ``YYYY-MM-DDTHH:MM:SS``, sortable)
    statuses: np.ndarray  # str
    values: np.ndarray  # float, one row per run in METRICS order; NaN: not measured
    changes: dict[int, list[str]] = field(default_factory=dict)  # entry index -> what changed before it

    @property
    def ok(self) -> np.ndarray:
        return self.statuses == "ok"

    @property
    def label(self) -> str:
        platform, framework, model, profile, device = self.key
        tuned = "" if profile == "identical" else f" ({profile})"
        return f"{platform}/{framework}/{model}{tuned} on {device}"


def _binned(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """At most about :data:`MAX_POINTS` points: consecutive runs binned, each bin's median time and value."""
    per_bin = max(1, -(-len(values) // MAX_POINTS))
    if per_bin == 1:
        return times, values, 1
    whole = len(values) // per_bin * per_bin
    x = np.median(times[:whole].reshape(-1, per_bin), axis=1)
    y = np.median(values[:whole].reshape(-1, per_bin), axis=1)
    if whole < len(values):
        x = np.append(x, np.median(times[whole:]))
        y = np.append(y, np.median(values[whole:]))
    return x, y, per_bin


def _days(times: np.ndarray) -> np.ndarray:
    """Normalised UTC times as matplotlib's date numbers (days since its epoch, 1970-01-01 by default)."""
    import matplotlib.dates as mdates

    return mdates.date2num(times.astype("datetime64[s]"))


def trend_figure(all_series: list[Series]) -> Figure | None:
    """The trend figure (one panel per metric); None when no ok run has any of the figures.

    A series of more than :data:`MAX_POINTS` runs is drawn as the medians of consecutive runs (the title says how
    many per point, or each legend line when the series differ); each series is one line per panel, version
    changes one set of dotted lines per panel (at most :data:`MAX_MARKS`). matplotlib is imported here, only when
    a figure is asked for (about a second). The CLI writes it as a PNG (:func:`write_png`), the HTML page inlines
    it as SVG (evaluate/report_html/).
    """
    columns = []
    for item in all_series:
        ok = item.ok
        columns.append((item, item.times[ok], item.values[ok]))
    panels = [(i, m) for i, m in enumerate(METRICS) if any((~np.isnan(v[:, i])).any() for _, _, v in columns)]
    if not panels:
        return None
    import matplotlib.dates as mdates

    from evaluate.render.mpl import Figure  # the Agg backend, a lighter import (evaluate/render/mpl.py)

    height = 3.2 * len(panels)
    fig = Figure(figsize=(11, height))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)
    marks: set[str] = set()
    lines = []
    for item, times, values in columns:
        days = _days(times) if len(times) else np.empty(0)
        for ax, (index, (_, _title, scale, _)) in zip(axes[:, 0], panels, strict=True):
            column = values[:, index] * scale
            keep = ~np.isnan(column)
            if keep.any():
                lines.append((ax, item, *_binned(days[keep], column[keep])))
        marks.update(str(item.times[i]) for i in item.changes)
    per_point = {per for *_, per in lines if per > 1}
    for ax, item, x, y, per in lines:  # runs per point: in the title when one number, else in each legend line
        several = len(per_point) > 1 and per > 1
        label = one_line(item.label, 80) + (f" (median of {per} runs per point)" if several else "")
        ax.plot(x, y, marker="o" if len(x) < 200 else None, markersize=3, linewidth=1, label=label)
    shown_marks = sorted(marks)[-MAX_MARKS:]
    mark_days = _days(np.array(shown_marks)) if shown_marks else []
    for ax, (_, (_, title, _, _)) in zip(axes[:, 0], panels, strict=True):
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        if len(mark_days):
            ax.vlines(mark_days, 0, 1, transform=ax.get_xaxis_transform(), colors="grey", linestyles=":",
                      linewidth=0.8)
    title = "tprimat history: dotted lines mark runs whose versions changed"
    if len(marks) > MAX_MARKS:
        title += f" (the last {MAX_MARKS} of {len(marks)})"
    if per_point:
        title += f"\nseries of over {MAX_POINTS:,} ok runs drawn as medians of " + \
            (f"{min(per_point)} consecutive runs per point" if len(per_point) == 1 else "consecutive runs (legend)")
    axes[0, 0].set_title(title)
    if len(all_series) <= 12:  # a fixed place: "best" tests every plotted point against every place (seconds)
        axes[0, 0].legend(fontsize=6, loc="upper left", framealpha=0.7)
    axes[-1, 0].xaxis_date()
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    # margins in inches (title lines above, two-line dates below), fixed: one draw, not tight_layout's two
    fig.subplots_adjust(left=0.09, right=0.98, top=1 - (0.65 if per_point else 0.45) / height, bottom=0.75 / height,
                        hspace=0.1)
    return fig


def write_png(all_series: list[Series], path: Path) -> Path | None:
    """:func:`trend_figure` as a PNG at ``path`` (atomically); None when there is no figure."""
    fig = trend_figure(all_series)
    if fig is None:
        return None
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    return path
