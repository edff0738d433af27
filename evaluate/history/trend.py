"""``history trend``: tokens/s per GPU, MFU and tokens per kWh of each job over time, version changes marked.

A series is one (platform, framework, model, profile, device): the same job on the same kind of device, so
a point that moves is the software, the driver or the node, not the comparison. Where the recorded versions
(driver, CUDA/ROCm, torch, image, framework and library versions) differ from the previous run of the
series, the run is marked with what changed, in the table and as a dotted line in the PNG. Failed and
incomplete runs are listed with their status and never plotted; a figure not measured is ``-``.

The PNG (matplotlib, Agg) has one panel per metric; every ok run is plotted (a series of more than
:data:`MAX_POINTS` runs as the medians of consecutive runs, which the title says, with how many per point), the
table shows the last ``--last`` runs of each series. The series' data and the figure are in ``trend_plot.py``
(no SQLAlchemy there).
"""

from __future__ import annotations

import json
import math

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from evaluate.history.query import Filters, library_matches
from evaluate.history.store import TREND_KEY, HistoryError, runs

# the data and the figure, without SQLAlchemy (evaluate/history/trend_plot.py), re-exported: callers import them here
from evaluate.history.trend_plot import MAX_MARKS, MAX_POINTS, METRICS, Series, trend_figure, write_png
from utils.io.sanitise import one_line

__all__ = ["MAX_MARKS", "MAX_POINTS", "METRICS", "UNKNOWN_DEVICE", "Series", "render_table", "trend_figure",
           "trend_series", "write_png"]

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


