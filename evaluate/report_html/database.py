"""The page's history part: the results database's trends and "what changed", and the trend figure.

Read only through ``evaluate/history/``'s query API on a read transaction. Off, missing or unreadable, the part is
one line (``HistoryFacts.absent``) with the location replaced by ``HISTORY_DB``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.summary import GroupSummary, SettingDifference
from evaluate.history.record import make_record, normalized_time
from evaluate.report_html.markup import Markup, svg
from utils.io.sanitise import one_line

# SQLAlchemy is optional: a Python without it (the lent GPU's native one, docs/PERFORMANCE.md) gets a page whose
# history part says so in one line
try:
    from evaluate.history.query import METRICS, Filters, RunView, count_runs, fact_differences, last_ok, metric_deltas
    from evaluate.history.store import open_database
    from evaluate.history.target import HistoryError, configured_db, resolve_target
    from evaluate.history.trend import trend_figure, trend_series
    NO_DATABASE = None
except ImportError as exc:
    NO_DATABASE = f"the results database cannot be read here: {one_line(exc, 200)}"

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from evaluate.history.trend import Series


@dataclass
class Change:
    """What changed between a group's plotted run and the last ok run of its job before it (the database's)."""

    label: str
    previous: str | None  # the earlier run, e.g. "#41 2026-11-26 10:02"; None: no earlier ok run
    facts: list[SettingDifference] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # each measured figure before and now, one line each


@dataclass
class HistoryFacts:
    """The database's part of the page, or why there is none (``absent``)."""

    absent: str | None = None
    runs: int = 0
    series: list[Series] = field(default_factory=list)  # the compared jobs' series
    trend_svg: Markup | None = None  # evaluate/history/trend.py's figure, inline
    changes: list[Change] = field(default_factory=list)


def _history_reason(exc: Exception, shown: str | None) -> str:
    return one_line(str(exc).replace(shown, "HISTORY_DB") if shown else str(exc), 300)


def read_history(db_value: str | None, comparison: Comparison) -> HistoryFacts:
    """Trends of the compared jobs, what changed since each group's previous ok run, and the trend figure;
    ``db_value``: ``--db`` or ``HISTORY_DB`` (None: config.env's)."""
    if NO_DATABASE is not None:
        return HistoryFacts(absent=NO_DATABASE)
    try:
        target = resolve_target(db_value if db_value is not None else configured_db())
    except HistoryError as exc:
        return HistoryFacts(absent=f"the results database cannot be used: {_history_reason(exc, None)}")
    if target is None:
        return HistoryFacts(absent="the results database is off (HISTORY_DB=off): no history, no trend")
    summaries = [s for groups in comparison.by_model.values() for s in groups]
    jobs = sorted({(s.group.platform, s.group.framework, s.group.model, s.group.profile) for s in summaries})
    try:
        with open_database(target, lock_timeout=5.0) as db, db.read() as conn:
            facts = HistoryFacts(runs=count_runs(conn))
            # one trend query per compared job (on the trend index), not the whole database filtered here; by the
            # model key, so a proxy's series (its label is the proxy's name) is found too
            facts.series = sorted((s for platform, framework, model, profile in jobs
                                   for s in trend_series(conn, Filters(platform=platform, framework=framework,
                                                                       model=model, profile=profile))),
                                  key=lambda s: s.key)
            facts.changes = [_change(conn, summary) for summary in summaries]
    except HistoryError as exc:
        return HistoryFacts(absent=f"no results database to read: {_history_reason(exc, target.shown)}")
    if facts.series:
        figure = trend_figure(facts.series)
        facts.trend_svg = svg(figure) if figure is not None else None  # SVG: faster to write than a PNG, and text
    return facts


def _change(conn: Connection, summary: GroupSummary) -> Change:
    """The group's plotted run against the last ok run of its job and device that ended before the group's first
    run: "since the last run" means since the runs before these (query.last_ok's ``before``)."""
    label = summary.group.label + f" {summary.group.model}"
    run = summary.representative
    if run is None:
        return Change(label, None)
    times = [t for t in (normalized_time(g.result.finished_at) or normalized_time(g.result.started_at)
                         for g in summary.group.runs) if t]
    current = RunView.of_record(make_record(run.result, run.path.name))
    previous = last_ok(conn, current, before=min(times, default=None))
    if previous is None:
        return Change(label, None)
    shown = f"#{previous.id} {str(previous.run.get('run_time') or '')[:16].replace('T', ' ')}".strip()
    metrics = [d.format(scale, digits, unit)
               for d, (_, _, scale, digits, unit) in zip(metric_deltas([previous], [current]), METRICS, strict=True)
               if d.a is not None or d.b is not None]
    return Change(label, shown, fact_differences([previous], [current]), metrics)
