"""``history trend``: tokens/s per GPU, MFU and tokens per kWh of each job over time, version changes marked.

A series is one job on one kind of device (platform, framework, model, profile, device), so a point that moves is
the software, the driver or the node. A run whose recorded versions differ from the one before is marked with what
changed (a dotted line in the figure). Failed runs are listed, never plotted. The figure has one panel per metric;
a series of more than :data:`MAX_POINTS` runs is drawn as medians of consecutive runs, and the title says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from evaluate.history.query import Filters, library_matches
from evaluate.history.store import TREND_KEY, runs
from evaluate.history.target import HistoryError
from utils.io.atomic import atomic_path
from utils.io.sanitise import one_line

if TYPE_CHECKING:
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
    import matplotlib.dates as mdates  # only with a figure: see trend_figure

    return mdates.date2num(times.astype("datetime64[s]"))


def trend_figure(all_series: list[Series]) -> Figure | None:
    """The trend figure (one panel per metric); None when no ok run has any of the figures.

    A series of more than :data:`MAX_POINTS` runs is drawn as the medians of consecutive runs (the title says how
    many per point, or each legend line when the series differ); each series is one line per panel, version
    changes one set of dotted lines per panel (at most :data:`MAX_MARKS`). The CLI writes it as a PNG
    (:func:`write_png`), the HTML page inlines it as SVG (evaluate/report_html/).
    """
    columns = []
    for item in all_series:
        ok = item.ok
        columns.append((item, item.times[ok], item.values[ok]))
    panels = [(i, m) for i, m in enumerate(METRICS) if any((~np.isnan(v[:, i])).any() for _, _, v in columns)]
    if not panels:
        return None
    # matplotlib only when a figure is drawn: its import is 0.65-0.70 s of the 2-core VM (measured 2026-12-07), and
    # every ``history`` command imports this module, ``add`` after each job of train.sh among them
    import matplotlib.dates as mdates

    from evaluate.render.mpl import Figure

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


UNKNOWN_DEVICE = "unknown device"
_FIGURES = [runs.c[name] for name, *_ in METRICS]
_TRIES = 3


def _changes(before: str, after: str) -> list[str]:
    """What changed between two runs' recorded versions (canonical JSON, so equal text is equal versions)."""
    old, new = json.loads(before), json.loads(after)
    keys = sorted(set(old) | set(new))
    return [f"{key} {old.get(key, '-')} -> {new.get(key, '-')}" for key in keys if old.get(key) != new.get(key)]


def _read(conn: Connection, filters: Filters) -> tuple[list, list]:  # type: ignore[type-arg]
    """The series (key and size) and their runs, in series then time order: two queries on the trend index.

    Both walk ``ix_runs_trend`` (evaluate/history/store.py, schema version 3) in its own order, so neither sorts,
    and the runs come back without their five key texts (100,000 rows are 100,000 small tuples): each series is the
    next ``size`` rows. A writer adding runs between the two (PostgreSQL's read committed; SQLite's read
    transaction holds its snapshot) shows as sizes that do not add up, and the read is done again.
    """
    for _ in range(_TRIES):
        sizes = conn.execute(filters.apply(select(*TREND_KEY, func.count())).group_by(*TREND_KEY)
                             .order_by(*TREND_KEY)).all()
        rows = conn.execute(filters.apply(select(runs.c.id, func.substr(runs.c.run_time, 1, 19), runs.c.status,
                                                 *_FIGURES, runs.c.versions))
                            .order_by(*TREND_KEY, runs.c.run_time, runs.c.id)).all()
        if sum(size[-1] for size in sizes) == len(rows):
            return sizes, rows
    raise HistoryError("the history database kept changing while the trend was read; run it again")


def trend_series(conn: Connection, filters: Filters) -> list[Series]:
    """Every series of the runs matching ``filters``, each in time order, changes marked.

    Rows become arrays column by column, each series a slice of them; a version change is found by comparing
    each run's versions text with the one before it in its series (one array comparison), and parsed only
    where it changed: 100,000 runs are read and arranged in about a second of CPU on a loaded 2-core machine
    (docs/PERFORMANCE.md).
    """
    sizes, rows = _read(conn, filters)
    if not rows:
        return []
    ids, times, statuses, tps, mfu, kwh, versions = zip(*rows, strict=True)
    all_ids = np.array(ids, dtype=np.int64)
    all_times = np.array(times, dtype=str)
    all_statuses = np.array(statuses, dtype=str)
    all_values = np.array((tps, mfu, kwh), dtype=float).T  # None (not measured) becomes NaN
    all_versions = np.array(versions, dtype=object)
    found = []
    start = 0
    for *key, size in sizes:
        part = slice(start, start + size)
        start += size
        chosen = all_versions[part]
        keep = np.ones(size, dtype=bool)
        if filters.library is not None:  # JSON, so not in SQL: parsed once per distinct text
            matches = {text: library_matches(json.loads(text), filters.library) for text in set(chosen)}
            keep = np.fromiter((matches[text] for text in chosen), dtype=bool, count=size)
            if not keep.any():
                continue
            chosen = chosen[keep]
        platform, framework, model, profile, device = key
        item = Series((platform, framework, model, profile, device or UNKNOWN_DEVICE), all_ids[part][keep],
                      all_times[part][keep], all_statuses[part][keep], all_values[part][keep])
        changed = np.flatnonzero(chosen[1:] != chosen[:-1]) + 1
        item.changes = {int(i): _changes(chosen[i - 1], chosen[i]) for i in changed}
        found.append(item)
    return sorted(found, key=lambda s: s.key)


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


