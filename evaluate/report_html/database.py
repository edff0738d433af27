"""The page's history part: the results database's trends and "what changed", and the trend figure (issue 37).

Read only through ``evaluate/history/``'s public query API (``query.list_runs``/``with_series``,
``trend.trend_series``, ``diff.fact_differences``/``metric_deltas``) on a read transaction; nothing here writes
to it. A database problem is shown with its location replaced by ``HISTORY_DB``; off, missing or unreadable, the
part is one line (``HistoryFacts.absent``) and the page says everything else.

Read in three steps so that a second process can do the middle one (evaluate/report_html/background.py):
:func:`history_request` (the compared jobs and each group's plotted run as stored rows: plain data),
:func:`query_history` (the database, the one step that loads SQLAlchemy) and :func:`with_trend` (the trend figure,
drawn from the series by evaluate/history/trend_plot.py, which loads no SQLAlchemy). :func:`read_history` does
all three in one process. Nothing heavy is imported at this module's top (the second process starts from it): the
result model, matplotlib and SQLAlchemy are imported inside the steps that need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from utils.io.sanitise import one_line

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from evaluate.analysis.comparison import Comparison
    from evaluate.analysis.summary import SettingDifference
    from evaluate.history.query import RunView
    from evaluate.history.record import RunRecord
    from evaluate.history.trend_plot import Series
    from evaluate.report_html.markup import Markup


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
    trend_svg: Markup | None = None  # evaluate/history/trend_plot.py's figure, inline (:func:`with_trend`)
    changes: list[Change] = field(default_factory=list)


@dataclass
class Candidate:
    """One compared group as the database part needs it: plain data, so it can be sent to a second process."""

    label: str
    record: RunRecord | None  # the group's plotted run as stored rows (evaluate/history/record.py); None: none
    since: str | None  # the time of the group's first run: "since the last run" means since the runs before it


@dataclass
class HistoryRequest:
    """What the page asks of the database (:func:`history_request`): the compared jobs and groups."""

    db_value: str | None  # --db or HISTORY_DB; None: config.env's
    jobs: list[tuple[str, str, str, str]]  # (platform, framework, model, profile) of each compared group
    candidates: list[Candidate]


def _history_reason(exc: Exception, shown: str | None) -> str:
    text = str(exc)
    if shown:
        text = text.replace(shown, "HISTORY_DB")
    return one_line(text, 300)


def history_request(db_value: str | None, comparison: Comparison) -> HistoryRequest:
    """The compared jobs and each group's plotted run as stored rows; no SQLAlchemy needed (record.py has none)."""
    from evaluate.history.record import make_record, normalized_time

    summaries = [s for groups in comparison.by_model.values() for s in groups]
    candidates = []
    for summary in summaries:
        run = summary.representative
        times = [t for t in (normalized_time(g.result.finished_at) or normalized_time(g.result.started_at)
                             for g in summary.group.runs) if t]
        candidates.append(Candidate(summary.group.label + f" {summary.group.model}",
                                    make_record(run.result, run.path.name) if run is not None else None,
                                    min(times, default=None)))
    jobs = sorted({(s.group.platform, s.group.framework, s.group.model, s.group.profile) for s in summaries})
    return HistoryRequest(db_value, jobs, candidates)


def query_history(request: HistoryRequest) -> HistoryFacts:
    """Trends of the compared jobs and what changed since each job's previous ok run, from the database; no figure.

    ``request.db_value``: ``--db`` or ``HISTORY_DB`` (None: config.env's). Off, missing or unreadable: absent, one
    line. What it returns is plain data and numpy arrays (it may cross a process boundary).
    """
    try:
        from evaluate.history.query import Filters, count_runs
        from evaluate.history.store import HistoryError, configured_db, open_database, resolve_target
        from evaluate.history.trend import trend_series
    except ImportError as exc:  # a native run without the images' SQLAlchemy (the lent GPU, docs/PERFORMANCE.md)
        return HistoryFacts(absent=f"the results database cannot be read here: {one_line(exc, 200)}")

    try:
        target = resolve_target(request.db_value if request.db_value is not None else configured_db())
    except HistoryError as exc:
        return HistoryFacts(absent=f"the results database cannot be used: {_history_reason(exc, None)}")
    if target is None:
        return HistoryFacts(absent="the results database is off (HISTORY_DB=off): no history, no trend")
    try:
        with open_database(target, lock_timeout=5.0) as db, db.read() as conn:
            facts = HistoryFacts(runs=count_runs(conn))
            # one trend query per compared job (on the trend index), not the whole database filtered here; by the
            # model key, so a proxy's series (its label is the proxy's name) is found too
            facts.series = sorted((s for platform, framework, model, profile in request.jobs
                                   for s in trend_series(conn, Filters(platform=platform, framework=framework,
                                                                       model=model, profile=profile))),
                                  key=lambda s: s.key)
            for candidate in request.candidates:
                facts.changes.append(_change(conn, candidate))
    except HistoryError as exc:
        return HistoryFacts(absent=f"no results database to read: {_history_reason(exc, target.shown)}")
    return facts


def with_trend(facts: HistoryFacts) -> HistoryFacts:
    """``facts`` with the trend figure of its series, inline (evaluate/history/trend_plot.py: no SQLAlchemy)."""
    if facts.series:
        from evaluate.history.trend_plot import trend_figure
        from evaluate.report_html.markup import svg

        figure = trend_figure(facts.series)
        facts.trend_svg = svg(figure) if figure is not None else None  # SVG: faster to write than a PNG, and text
    return facts


def read_history(db_value: str | None, comparison: Comparison) -> HistoryFacts:
    """The database's part of the page, read in this process (:func:`history_request`, :func:`query_history`,
    :func:`with_trend`)."""
    return with_trend(query_history(history_request(db_value, comparison)))


def _before(conn: Connection, candidate: RunView, since: str | None) -> RunView | None:
    """The last ok baseline-worthy run of the candidate's job and device that ended before this group's first run.

    Not ``query.last_ok``: that one finds the group's own repeat runs (``train.sh`` adds each run as it ends), and
    "since the last run" means since the runs before these.
    """
    from sqlalchemy import select

    from evaluate.history.query import RunView, with_series
    from evaluate.history.store import runs

    r = candidate.run
    device = runs.c.device_name.is_(None) if r["device_name"] is None else runs.c.device_name == r["device_name"]
    statement = select(runs).where(runs.c.platform == r["platform"], runs.c.framework == r["framework"],
                                   runs.c.status == "ok", runs.c.workload_key == r["workload_key"],
                                   runs.c.baseline_ok.is_(True), device)
    if since is not None:
        statement = statement.where(runs.c.run_time < since)
    row = conn.execute(statement.order_by(runs.c.run_time.desc(), runs.c.id.desc()).limit(1)).first()
    return with_series(conn, [RunView(dict(row._mapping))])[0] if row is not None else None


def _change(conn: Connection, candidate: Candidate) -> Change:
    from evaluate.history.diff import METRICS, fact_differences, metric_deltas
    from evaluate.history.query import RunView

    if candidate.record is None:
        return Change(candidate.label, None)
    current = RunView.of_record(candidate.record)
    previous = _before(conn, current, candidate.since)
    if previous is None:
        return Change(candidate.label, None)
    shown = f"#{previous.id} {str(previous.run.get('run_time') or '')[:16].replace('T', ' ')}".strip()
    metrics = [d.format(scale, digits, unit)
               for d, (_, _, scale, digits, unit) in zip(metric_deltas([previous], [current]), METRICS, strict=True)
               if d.a is not None or d.b is not None]
    return Change(candidate.label, shown, fact_differences([previous], [current]), metrics)


