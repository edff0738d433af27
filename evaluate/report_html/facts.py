"""What the page shows, gathered once: the comparison, the history, the gate's verdicts, each run's files.

Each part that may be absent is a value or a one-line reason, never an exception: a page without a results
database, without a gate report or without evaluation still says everything else (issue 37). The history is read
only through ``evaluate/history/``'s public query API (``query.list_runs``/``with_series``, ``trend.trend_series``,
``diff.fact_differences``/``metric_deltas``) on a read transaction; nothing here writes to it. No absolute path
of this machine goes into the facts: files are named relative to the results folder, and a database problem is
shown with its location replaced by ``HISTORY_DB``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluate.analysis import GroupSummary, SettingDifference
from evaluate.report import Comparison
from evaluate.report_html.markup import Markup, svg
from evaluate.results import LoadedResult
from utils.files.json_input import JsonInputError, one_line, read_json

if TYPE_CHECKING:  # the database's modules load SQLAlchemy (0.6 s of CPU): only when a database is read
    from sqlalchemy.engine import Connection

    from evaluate.history.diff import MetricDelta
    from evaluate.history.query import RunView
    from evaluate.history.trend import Series

GATE_REPORT = "gate.json"  # python -m evaluate.gate --report OUTPUT_DIR/gate.json
TREND_SHOWN = 8  # runs of each series in the page's trend table (the figure has them all)


@dataclass
class Change:
    """What changed between a group's plotted run and the last ok run of its job before it (the database's)."""

    label: str
    previous: str | None  # the earlier run, e.g. "#41 2026-11-26 10:02"; None: no earlier ok run
    facts: list[SettingDifference] = field(default_factory=list)
    metrics: list[MetricDelta] = field(default_factory=list)


@dataclass
class HistoryFacts:
    """The database's part of the page, or why there is none (``absent``)."""

    absent: str | None = None
    runs: int = 0
    series: list[Series] = field(default_factory=list)  # the compared jobs' series
    trend_svg: Markup | None = None  # evaluate/history/trend.py's figure, inline
    changes: list[Change] = field(default_factory=list)


@dataclass
class GateFacts:
    """The gate's JSON report (``python -m evaluate.gate --report``), or why there is none."""

    absent: str | None = None
    report: dict[str, Any] = field(default_factory=dict)
    source: str = GATE_REPORT


@dataclass
class PageFacts:
    comparison: Comparison
    results_dir: Path
    history: HistoryFacts
    gate: GateFacts
    logs: dict[Path, str] = field(default_factory=dict)  # result path -> its log, relative to the results folder
    results_href: str = ""  # the results folder relative to the page ("" when the page is in it)

    def beside(self, name: str) -> str:
        """A file of the results folder as the page links it."""
        return f"{self.results_href}/{name}" if self.results_href else name

    def local(self, text: str) -> str:
        """``text`` with the results folder's absolute path cut: files are named relative to the page."""
        for folder in {str(self.results_dir.resolve()), str(self.results_dir.absolute())}:
            text = text.replace(folder + "/", "").replace(folder, ".")
        return text

    @property
    def runs(self) -> list[LoadedResult]:
        return [run for groups in self.comparison.by_model.values() for s in groups for run in s.group.runs]


def log_links(results_dir: Path, runs: list[LoadedResult]) -> dict[Path, str]:
    """Each run's log inside the results folder (``logs/<result stem>.log``, multi-node ``..._node<k>.log``)."""
    logs = results_dir / "logs"
    if not logs.is_dir():
        return {}
    present = {p.name for p in logs.glob("*.log")}
    found = {}
    for run in runs:
        names = [f"{run.path.stem}.log", *sorted(n for n in present if n.startswith(f"{run.path.stem}_node"))]
        name = next((n for n in names if n in present), None)
        if name is not None:
            found[run.path] = f"logs/{name}"
    return found


def read_gate(path: Path | None, results_dir: Path) -> GateFacts:
    """The gate report at ``path`` (default ``results_dir/gate.json``); absent with one line when there is none."""
    explicit = path is not None
    path = path if explicit else results_dir / GATE_REPORT
    if not path.is_file():
        if explicit:
            return GateFacts(absent=f"no gate report at {one_line(path.name, 80)}", source=path.name)
        return GateFacts(absent="no regression-gate report: python -m evaluate.gate --candidate OUTPUT_DIR "
                                f"--report OUTPUT_DIR/{GATE_REPORT} writes one")
    try:
        data = read_json(path)
    except JsonInputError as exc:
        return GateFacts(absent=f"the gate report {one_line(path.name, 80)} cannot be read: "
                                f"{one_line(str(exc).replace(str(path), path.name), 200)}", source=path.name)
    if not isinstance(data, dict) or not isinstance(data.get("candidates", []), list):
        return GateFacts(absent=f"the gate report {one_line(path.name, 80)} is not evaluate.gate's report",
                         source=path.name)
    return GateFacts(report=data, source=path.name)


def _history_reason(exc: Exception, shown: str | None) -> str:
    text = str(exc)
    if shown:
        text = text.replace(shown, "HISTORY_DB")
    return one_line(text, 300)


def read_history(db_value: str | None, comparison: Comparison) -> HistoryFacts:
    """Trends of the compared jobs and what changed since each job's previous ok run, from the database.

    ``db_value``: ``--db`` or ``HISTORY_DB`` (None: config.env's). Off, missing or unreadable: absent, one line.
    """
    try:
        from evaluate.history.query import Filters, count_runs
        from evaluate.history.store import HistoryError, configured_db, open_database, resolve_target
        from evaluate.history.trend import trend_figure, trend_series
    except ImportError as exc:  # a native run without the images' SQLAlchemy (the lent GPU, docs/PERFORMANCE.md)
        return HistoryFacts(absent=f"the results database cannot be read here: {one_line(exc, 200)}")

    try:
        target = resolve_target(db_value if db_value is not None else configured_db())
    except HistoryError as exc:
        return HistoryFacts(absent=f"the results database cannot be used: {_history_reason(exc, None)}")
    if target is None:
        return HistoryFacts(absent="the results database is off (HISTORY_DB=off): no history, no trend")
    summaries = [s for groups in comparison.by_model.values() for s in groups]
    jobs = {(s.group.platform, s.group.framework, s.group.model, s.group.profile) for s in summaries}
    try:
        with open_database(target, lock_timeout=5.0) as db, db.read() as conn:
            facts = HistoryFacts(runs=count_runs(conn))
            # one trend query per compared job (on the trend index), not the whole database filtered here; by the
            # model key, so a proxy's series (its label is the proxy's name) is found too
            facts.series = sorted((s for platform, framework, model, profile in sorted(jobs)
                                   for s in trend_series(conn, Filters(platform=platform, framework=framework,
                                                                       model=model, profile=profile))),
                                  key=lambda s: s.key)
            for summary in summaries:
                facts.changes.append(_change(conn, summary))
    except HistoryError as exc:
        return HistoryFacts(absent=f"no results database to read: {_history_reason(exc, target.shown)}")
    figure = trend_figure(facts.series) if facts.series else None
    facts.trend_svg = svg(figure) if figure is not None else None  # SVG: faster to write than a PNG, and text
    return facts


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


def _change(conn: Connection, summary: GroupSummary) -> Change:
    from evaluate.history.diff import fact_differences, metric_deltas
    from evaluate.history.query import RunView
    from evaluate.history.record import make_record, normalized_time

    label = summary.group.label + f" {summary.group.model}"
    run = summary.representative
    if run is None:
        return Change(label, None)
    candidate = RunView.of_record(make_record(run.result, run.path.name))
    times = [t for t in (normalized_time(g.result.finished_at) or normalized_time(g.result.started_at)
                         for g in summary.group.runs) if t]
    previous = _before(conn, candidate, min(times, default=None))
    if previous is None:
        return Change(label, None)
    shown = f"#{previous.id} {str(previous.run.get('run_time') or '')[:16].replace('T', ' ')}".strip()
    return Change(label, shown, fact_differences([previous], [candidate]), metric_deltas([previous], [candidate]))


def gather(comparison: Comparison, results_dir: Path, db_value: str | None, gate_path: Path | None,
           page: Path) -> PageFacts:
    """Every fact of the page written at ``page`` (the results' links are made relative to it)."""
    facts = PageFacts(comparison, results_dir, read_history(db_value, comparison), read_gate(gate_path, results_dir))
    facts.logs = log_links(results_dir, facts.runs)
    href = os.path.relpath(results_dir.resolve(), page.parent.resolve())
    facts.results_href = "" if href == "." else Path(href).as_posix()
    return facts


def dumped(value: Any) -> str:
    """A foreign JSON value shown as text (the page escapes it)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
