"""Reading runs back: filters for ``list`` and ``trend``, selectors for ``diff`` and the gate, and one view of a run.

A selector names runs in one word, as a user or a CI job types it:

* ``42`` (a run id) or ``42,43,44`` (several: a group of repeated runs);
* ``tag:nightly`` or a bare ``nightly``: every run with that tag (``history add --tag``, ``history tag``);
* ``last-ok`` (the gate's default): the last ok run of the candidate's workload on the candidate's device,
  resolved by the gate, which knows the candidate.

A filter narrows by platform, framework, model, profile, status, date (``--since``/``--until``, ISO dates
or times, UTC), device (a case-insensitive part of its name), tag, and a library version
(``--library torch=2.7.0``, ``--library transformer_engine=2.*``, or just a name: runs that recorded it).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.engine import Connection

from evaluate.history.record import RunRecord, normalized_time
from evaluate.history.store import HistoryError, runs, series, tags
from utils.io.sanitise import one_line

LAST_OK = "last-ok"
_IDS = re.compile(r"\d+(?:,\d+)*")


@dataclass
class RunView:
    """One stored run (or a candidate file not stored): its ``runs`` columns and, when loaded, its arrays."""

    run: dict[str, Any]
    series: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def id(self) -> int | None:
        return self.run.get("id")

    @property
    def label(self) -> str:
        r = self.run
        where = f"#{r['id']}" if r.get("id") is not None else one_line(r.get("source") or "file", 80)
        return f"{where} {r['platform']}/{r['framework']}/{r['model_label']}"

    @property
    def versions(self) -> dict[str, str]:
        return json.loads(self.run["versions"]) if self.run.get("versions") else {}

    @property
    def details(self) -> dict[str, Any]:
        return json.loads(self.series["details"]) if self.series else {}

    @property
    def losses(self) -> list[float | None]:
        return json.loads(self.series["losses"]) if self.series else []

    @property
    def step_times(self) -> list[float | None]:
        return json.loads(self.series["step_times"]) if self.series else []

    def loss_by_step(self) -> dict[int, float | None]:
        """Loss per training step number (array entry i is step ``first_step + i * step_interval``)."""
        if not self.series:
            return {}
        first, interval = self.series["first_step"], self.series["step_interval"]
        return {first + i * interval: value for i, value in enumerate(self.losses)}

    @classmethod
    def of_record(cls, record: RunRecord) -> RunView:
        return cls({**record.run, "id": None}, dict(record.series))


@dataclass
class Filters:
    platform: str | None = None
    framework: str | None = None
    model: str | None = None
    profile: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None
    device: str | None = None
    tag: str | None = None
    library: str | None = None
    workload_key: str | None = None

    def apply(self, statement: Select) -> Select:
        for name in ("platform", "framework", "model", "profile", "status", "workload_key"):
            value = getattr(self, name)
            if value:
                statement = statement.where(getattr(runs.c, name) == value)
        for name, op in (("since", "__ge__"), ("until", "__le__")):
            value = getattr(self, name)
            if value:
                moment = _moment(value, name, end=name == "until")
                statement = statement.where(getattr(runs.c.run_time, op)(moment))
        if self.device:
            statement = statement.where(func.lower(runs.c.device_name).contains(self.device.lower(), autoescape=True))
        if self.tag:
            statement = statement.where(runs.c.id.in_(select(tags.c.run_id).where(tags.c.tag == self.tag)))
        return statement

    def keep(self, view: RunView) -> bool:
        """The library filter, applied to each run's recorded versions (JSON, so not in SQL)."""
        return self.library is None or library_matches(view.versions, self.library)


def _moment(value: str, name: str, end: bool) -> str:
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        text += "T23:59:59+00:00" if end else "T00:00:00+00:00"
    moment = normalized_time(text)
    if moment is None:
        raise HistoryError(f"--{name} {one_line(value, 40)!r}: not an ISO date or time (e.g. 2025-11-01)")
    return moment


def library_matches(versions: dict[str, str], spec: str) -> bool:
    """``NAME`` (recorded at all) or ``NAME=VERSION`` (a shell pattern: ``2.*``); NAME may drop its group prefix."""
    name, _, wanted = spec.partition("=")
    name = name.strip().lower()
    for key, value in versions.items():
        named = key.lower() == name or key.lower().endswith("." + name)
        if named and (not wanted or fnmatch.fnmatchcase(str(value), wanted.strip())):
            return True
    return False


LIST_COLUMNS = tuple(runs.c)


def list_runs(conn: Connection, filters: Filters, limit: int | None = None,
              columns: Sequence = LIST_COLUMNS) -> list[RunView]:
    """Runs matching ``filters``, oldest first (the newest ``limit`` when given)."""
    statement = filters.apply(select(*columns))
    if limit:
        statement = statement.order_by(runs.c.run_time.desc(), runs.c.id.desc()).limit(limit)
    else:
        statement = statement.order_by(runs.c.run_time, runs.c.id)
    views = [RunView(dict(row._mapping)) for row in conn.execute(statement)]
    if limit:
        views.reverse()
    return [v for v in views if filters.keep(v)]


def with_series(conn: Connection, views: list[RunView]) -> list[RunView]:
    """Load each stored run's arrays and tags (candidates from files already carry theirs)."""
    ids = [v.id for v in views if v.id is not None and v.series is None]
    if ids:
        rows = conn.execute(select(series).where(series.c.run_id.in_(ids)))
        loaded = {row.run_id: dict(row._mapping) for row in rows}
        named: dict[int, list[str]] = {}
        for run_id, tag in conn.execute(select(tags.c.run_id, tags.c.tag).where(tags.c.run_id.in_(ids))):
            named.setdefault(run_id, []).append(tag)
        for view in views:
            if view.id in loaded:
                view.series = loaded[view.id]
                view.tags = sorted(named.get(view.id, []))
    return views


def runs_by_id(conn: Connection, ids: Iterable[int]) -> list[RunView]:
    wanted = sorted(set(ids))
    found = {row.id: RunView(dict(row._mapping)) for row in conn.execute(select(runs).where(runs.c.id.in_(wanted)))}
    missing = [i for i in wanted if i not in found]
    if missing:
        raise HistoryError(f"no run with id {', '.join(map(str, missing))} in the history database")
    return [found[i] for i in wanted]


def resolve(conn: Connection, selector: str) -> list[RunView]:
    """The runs a selector names (see the module's docstring); an empty match is an error."""
    spec = selector.strip()
    if spec == LAST_OK:
        raise HistoryError(f"'{LAST_OK}' needs a candidate: it is the gate's baseline selector")
    if _IDS.fullmatch(spec):
        return with_series(conn, runs_by_id(conn, (int(i) for i in spec.split(","))))
    name = spec[len("tag:"):] if spec.startswith("tag:") else spec
    if not name:
        raise HistoryError("an empty selector: give run ids (42 or 42,43) or a tag (tag:NAME)")
    statement = select(runs).where(runs.c.id.in_(select(tags.c.run_id).where(tags.c.tag == name)))
    views = [RunView(dict(row._mapping)) for row in conn.execute(statement.order_by(runs.c.run_time, runs.c.id))]
    if not views:
        raise HistoryError(f"selector {one_line(selector, 80)!r} matches no run (no run ids, no run tagged so)")
    return with_series(conn, views)


def last_ok(conn: Connection, candidate: RunView) -> RunView | None:
    """The last run usable as a baseline of the candidate's workload, platform, framework and device."""
    r = candidate.run
    statement = (select(runs).where(runs.c.workload_key == r["workload_key"], runs.c.platform == r["platform"],
                                    runs.c.framework == r["framework"], runs.c.baseline_ok.is_(True),
                                    runs.c.content_hash != r["content_hash"])
                 .order_by(runs.c.run_time.desc(), runs.c.id.desc()).limit(1))
    statement = statement.where(runs.c.device_name.is_(None) if r["device_name"] is None
                                else runs.c.device_name == r["device_name"])
    if r.get("run_time"):
        statement = statement.where(runs.c.run_time <= r["run_time"])
    row = conn.execute(statement).first()
    return with_series(conn, [RunView(dict(row._mapping))])[0] if row is not None else None


def count_runs(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())
