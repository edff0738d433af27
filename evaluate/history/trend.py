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
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy.engine import Connection

from evaluate.history.query import Filters, list_runs
from evaluate.history.store import runs
from utils.atomic import atomic_path
from utils.json_input import one_line

METRICS = (("tokens_per_second_per_gpu", "tokens/s/GPU", 1.0, "{:,.0f}"), ("mfu", "MFU %", 100.0, "{:.1f}"),
           ("tokens_per_kwh", "tokens/kWh", 1.0, "{:,.0f}"))
_COLUMNS = [runs.c[name] for name in ("id", "run_time", "status", "platform", "framework", "model_label", "profile",
                                      "device_name", "tokens_per_second_per_gpu", "mfu", "tokens_per_kwh", "versions")]


@dataclass
class Point:
    run_id: int
    time: str
    status: str
    values: dict[str, float | None]
    changes: list[str] = field(default_factory=list)


@dataclass
class Series:
    key: tuple[str, str, str, str, str]
    points: list[Point] = field(default_factory=list)

    @property
    def label(self) -> str:
        platform, framework, model, profile, device = self.key
        tuned = " (tuned)" if profile == "tuned" else ""
        return f"{platform}/{framework}/{model}{tuned} on {device}"


def _changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    keys = sorted(set(before) | set(after))
    return [f"{key} {before.get(key, '-')} -> {after.get(key, '-')}" for key in keys
            if before.get(key) != after.get(key)]


def trend_series(conn: Connection, filters: Filters) -> list[Series]:
    """Every series of the runs matching ``filters``, each in time order, changes marked."""
    grouped: dict[tuple, Series] = {}
    previous: dict[tuple, dict[str, str]] = {}
    for view in list_runs(conn, filters, columns=_COLUMNS):
        r = view.run
        key = (r["platform"], r["framework"], r["model_label"], r["profile"], r["device_name"] or "unknown device")
        versions = json.loads(r["versions"])
        point = Point(r["id"], r["run_time"], r["status"], {name: r[name] for name, *_ in METRICS})
        if key in previous:
            point.changes = _changes(previous[key], versions)
        previous[key] = versions
        grouped.setdefault(key, Series(key)).points.append(point)
    return [grouped[k] for k in sorted(grouped)]


def _shown(value: float | None, scale: float, pattern: str) -> str:
    return "-" if value is None else pattern.format(value * scale)


def render_table(all_series: list[Series], last: int) -> str:
    """The last ``last`` runs of each series, one line each, with what changed since the run before."""
    if not all_series:
        return "no runs match"
    lines = []
    for item in all_series:
        lines.append(f"== {one_line(item.label, 200)}: {len(item.points)} run(s)")
        header = f"{'time (UTC)':<20} {'run':>7} {'status':<10}" + "".join(f" {title:>14}" for _, title, *_ in METRICS)
        lines.append(header + "  changed since the run before")
        for point in item.points[-last:]:
            row = f"{point.time[:19].replace('T', ' '):<20} {'#' + str(point.run_id):>7} {point.status:<10}"
            row += "".join(f" {_shown(point.values[name], scale, pattern):>14}" for name, _, scale, pattern in METRICS)
            if point.changes:
                shown = "; ".join(point.changes[:4]) + (f"; +{len(point.changes) - 4} more" if len(point.changes) > 4
                                                        else "")
                row += "  " + one_line(shown, 300)
            lines.append(row)
    return "\n".join(lines)


def write_png(all_series: list[Series], path: Path) -> Path | None:
    """The trend figure (one panel per metric); None when no ok run has any of the figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    measured = {name for s in all_series for p in s.points if p.status == "ok" for name in p.values
                if p.values[name] is not None}
    panels = [m for m in METRICS if m[0] in measured]
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.2 * len(panels)), sharex=True, squeeze=False)
    marked: dict[datetime, int] = defaultdict(int)
    for item in all_series:
        ok = [p for p in item.points if p.status == "ok"]
        times = [datetime.fromisoformat(p.time) for p in ok]
        for ax, (name, _title, scale, _) in zip(axes[:, 0], panels, strict=True):
            pairs = [(t, p.values[name] * scale) for t, p in zip(times, ok, strict=True) if p.values[name] is not None]
            if pairs:
                ax.plot([t for t, _ in pairs], [v for _, v in pairs], marker="o" if len(pairs) < 200 else None,
                        markersize=3, linewidth=1, label=one_line(item.label, 80))
        for point in item.points:
            if point.changes:
                marked[datetime.fromisoformat(point.time)] += 1
    for ax, (_, title, _, _) in zip(axes[:, 0], panels, strict=True):
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        for moment in list(marked)[:200]:
            ax.axvline(moment, color="grey", linestyle=":", linewidth=0.8)
    axes[0, 0].set_title("tprimat history: dotted lines mark runs whose versions changed")
    if len(all_series) <= 12:
        axes[0, 0].legend(fontsize=7, loc="best")
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d\n%H:%M"))
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path
