"""``history trend``: tokens/s per GPU, MFU and tokens per kWh of each job over time, version changes marked.

A series is one (platform, framework, model, profile, device): the same job on the same kind of device, so
a point that moves is the software, the driver or the node, not the comparison. Where the recorded versions
(driver, CUDA/ROCm, torch, image, framework and library versions) differ from the previous run of the
series, the run is marked with what changed, in the table and as a dotted line in the PNG. Failed and
incomplete runs are listed with their status and never plotted; a figure not measured is ``-``.

The PNG (matplotlib, Agg) has one panel per metric; all stored runs are plotted, the table shows the last
``--last`` runs of each series.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection

from evaluate.history.query import Filters, library_matches
from evaluate.history.store import runs
from utils.files.atomic import atomic_path
from utils.files.json_input import one_line

METRICS = (("tokens_per_second_per_gpu", "tokens/s/GPU", 1.0, "{:,.0f}"), ("mfu", "MFU %", 100.0, "{:.1f}"),
           ("tokens_per_kwh", "tokens/kWh", 1.0, "{:,.0f}"))
_NAN = float("nan")
MAX_POINTS = 2_000  # per series in the PNG
MAX_MARKS = 200  # version-change lines in the PNG
_COLUMNS = [runs.c[name] for name in ("id", "run_time", "status", "platform", "framework", "model_label", "profile",
                                      "device_name", "tokens_per_second_per_gpu", "mfu", "tokens_per_kwh", "versions")]


@dataclass
class Series:
    """One job on one kind of device over time, column by column (100,000 runs are 100,000 entries, no objects)."""

    key: tuple[str, str, str, str, str]
    ids: list[int] = field(default_factory=list)
    times: list[str] = field(default_factory=list)  # normalised UTC, sortable
    statuses: list[str] = field(default_factory=list)
    values: list[tuple[float, float, float]] = field(default_factory=list)  # METRICS order; NaN: not measured
    ok: list[bool] = field(default_factory=list)
    changes: dict[int, list[str]] = field(default_factory=dict)  # entry index -> what changed before it

    @property
    def label(self) -> str:
        platform, framework, model, profile, device = self.key
        tuned = "" if profile == "identical" else f" ({profile})"
        return f"{platform}/{framework}/{model}{tuned} on {device}"


def _changes(before: str, after: str) -> list[str]:
    """What changed between two runs' recorded versions (canonical JSON, so equal text is equal versions)."""
    old, new = json.loads(before), json.loads(after)
    keys = sorted(set(old) | set(new))
    return [f"{key} {old.get(key, '-')} -> {new.get(key, '-')}" for key in keys if old.get(key) != new.get(key)]


def trend_series(conn: Connection, filters: Filters) -> list[Series]:
    """Every series of the runs matching ``filters``, each in time order, changes marked.

    Rows are read as plain tuples and versions compared as text (parsed only where they differ): a trend
    over 100,000 runs takes seconds (docs/PERFORMANCE.md).
    """
    grouped: dict[tuple, Series] = {}
    previous: dict[tuple, str] = {}
    statement = filters.apply(select(*_COLUMNS)).order_by(runs.c.run_time, runs.c.id)
    for run_id, time, status, platform, framework, model, profile, device, tps, mfu, kwh, versions in \
            conn.execute(statement).tuples().all():
        if filters.library is not None and not library_matches(json.loads(versions), filters.library):
            continue
        key = (platform, framework, model, profile, device or "unknown device")
        series = grouped.get(key)
        if series is None:
            series = grouped[key] = Series(key)
        before = previous.get(key)
        if before is not None and before != versions:
            series.changes[len(series.ids)] = _changes(before, versions)
        previous[key] = versions
        series.ids.append(run_id)
        series.times.append(time)
        series.statuses.append(status)
        series.values.append((_NAN if tps is None else tps, _NAN if mfu is None else mfu, _NAN if kwh is None else kwh))
        series.ok.append(status == "ok")
    return [grouped[k] for k in sorted(grouped)]


def _shown(value: float, scale: float, pattern: str) -> str:
    return "-" if math.isnan(value) else pattern.format(value * scale)


def render_table(all_series: list[Series], last: int) -> str:
    """The last ``last`` runs of each series, one line each, with what changed since the run before."""
    if not all_series:
        return "no runs match"
    lines = []
    for item in all_series:
        lines.append(f"== {one_line(item.label, 200)}: {len(item.ids)} run(s)")
        header = f"{'time (UTC)':<20} {'run':>7} {'status':<10}" + "".join(f" {title:>14}" for _, title, *_ in METRICS)
        lines.append(header + "  changed since the run before")
        for i in range(max(0, len(item.ids) - last), len(item.ids)):
            row = f"{item.times[i][:19].replace('T', ' '):<20} {'#' + str(item.ids[i]):>7} {item.statuses[i]:<10}"
            row += "".join(f" {_shown(value, scale, pattern):>14}"
                           for value, (_, _, scale, pattern) in zip(item.values[i], METRICS, strict=True))
            changes = item.changes.get(i)
            if changes:
                shown = "; ".join(changes[:4]) + (f"; +{len(changes) - 4} more" if len(changes) > 4 else "")
                row += "  " + one_line(shown, 300)
            lines.append(row)
    return "\n".join(lines)


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


def write_png(all_series: list[Series], path: Path) -> Path | None:
    """The trend figure (one panel per metric); None when no ok run has any of the figures.

    A series of more than :data:`MAX_POINTS` runs is drawn as the medians of consecutive runs (the legend says
    how many per point); version changes are one set of dotted lines per panel (at most :data:`MAX_MARKS`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    columns = []
    for item in all_series:
        ok = np.fromiter(item.ok, dtype=bool, count=len(item.ok))
        values = np.array(item.values, dtype=float)[ok] if ok.any() else np.empty((0, len(METRICS)))
        times = [t[:19] for t, good in zip(item.times, item.ok, strict=True) if good]
        days = mdates.date2num(np.array(times, dtype="datetime64[s]"))
        columns.append((item, days, values))
    panels = [(i, m) for i, m in enumerate(METRICS) if any((~np.isnan(v[:, i])).any() for _, _, v in columns)]
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels)), sharex=True, squeeze=False)
    marks: set[str] = set()
    for item, days, values in columns:
        for ax, (index, (_, _title, scale, _)) in zip(axes[:, 0], panels, strict=True):
            column = values[:, index] * scale
            keep = ~np.isnan(column)
            if keep.any():
                x, y, per = _binned(days[keep], column[keep])
                label = one_line(item.label, 80) + (f" (median of {per} runs per point)" if per > 1 else "")
                ax.plot(x, y, marker="o" if len(x) < 200 else None, markersize=3, linewidth=1, label=label)
        marks.update(item.times[i][:19] for i in item.changes)
    shown_marks = sorted(marks)[-MAX_MARKS:]
    mark_days = mdates.date2num(np.array(shown_marks, dtype="datetime64[s]")) if shown_marks else []
    for ax, (_, (_, title, _, _)) in zip(axes[:, 0], panels, strict=True):
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        if len(mark_days):
            ax.vlines(mark_days, 0, 1, transform=ax.get_xaxis_transform(), colors="grey", linestyles=":",
                      linewidth=0.8)
    title = "tprimat history: dotted lines mark runs whose versions changed"
    if len(marks) > MAX_MARKS:
        title += f" (the last {MAX_MARKS} of {len(marks)})"
    axes[0, 0].set_title(title)
    if len(all_series) <= 12:  # a fixed place: "best" tests every plotted point against every place (seconds)
        axes[0, 0].legend(fontsize=6, loc="upper left", framealpha=0.7)
    axes[-1, 0].xaxis_date()
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    fig.subplots_adjust(left=0.09, right=0.98, top=0.95, bottom=0.08, hspace=0.1)  # one draw, not tight_layout's two
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
