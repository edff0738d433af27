"""Reading runs back: filters for ``list`` and ``trend``, selectors for ``diff`` and the gate, one view of a run,
and what differs between runs.

A selector: run ids (``42``, ``42,43,44``), ``tag:nightly`` or a bare ``nightly``, or ``last-ok`` (the gate's).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.engine import Connection

from evaluate.analysis.stats import Estimate, estimate, ratio_estimate
from evaluate.analysis.summary import SettingDifference
from evaluate.history.record import RunRecord, normalized_time, text
from evaluate.history.store import runs, series, tags
from evaluate.history.target import HistoryError
from utils.io.sanitise import one_line

LAST_OK = "last-ok"
_IDS = re.compile(r"\d+(?:,\d+)*")
# Bounds of a selector, checked before it reaches the database or a message: a run id is the ``runs.id`` column's
# (PostgreSQL's INTEGER), a selector names at most MAX_SELECTED runs (SQLite and PostgreSQL bound a statement's
# parameters), a tag is the ``tags.tag`` column's length.
MAX_ID = 2**31 - 1
MAX_SELECTED = 1_000
TAG_CHARS = 200


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
        """``#42 nvd/mega/llama`` (a file's name for a candidate not stored): one bounded line, the row is foreign."""
        r = self.run
        where = f"#{r['id']}" if r.get("id") is not None else one_line(r.get("source") or "file", 80)
        return f"{where} {one_line('/'.join(map(str, (r['platform'], r['framework'], r['model_label']))))}"

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
            statement = statement.where(func.lower(runs.c.device_name).contains(text(self.device.lower()),
                                                                                  autoescape=True))
        if self.tag:
            statement = statement.where(runs.c.id.in_(select(tags.c.run_id).where(tags.c.tag == tag_name(self.tag))))
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


def run_ids(spec: str) -> list[int]:
    """The ids of ``42`` or ``42,43,44``, each a run id there can be; refused in one line before any query."""
    words = spec.split(",")
    if len(words) > MAX_SELECTED:
        raise HistoryError(f"the selector names {len(words):,} run ids; at most {MAX_SELECTED:,} (tag the runs and "
                           "select tag:NAME)")
    bad = next((w for w in words if len(w) > len(str(MAX_ID)) or not 1 <= int(w) <= MAX_ID), None)
    if bad is not None:
        raise HistoryError(f"run id {one_line(bad, 40)}: not a run id (1 to {MAX_ID:,})")
    return [int(w) for w in words]


def tag_name(name: str) -> str:
    """A tag as stored (``record.text``), refused in one line when longer than the column."""
    if len(name) > TAG_CHARS:
        raise HistoryError(f"tag {one_line(name, 40)!r}: {len(name):,} characters, at most {TAG_CHARS}")
    return text(name) or ""


def runs_by_id(conn: Connection, ids: Iterable[int]) -> list[RunView]:
    wanted = sorted(set(ids))
    found = {row.id: RunView(dict(row._mapping)) for row in conn.execute(select(runs).where(runs.c.id.in_(wanted)))}
    missing = [i for i in wanted if i not in found]
    if missing:
        more = f" and {len(missing) - 10:,} more" if len(missing) > 10 else ""
        raise HistoryError(f"no run with id {', '.join(map(str, missing[:10]))}{more} in the history database")
    return [found[i] for i in wanted]


def resolve(conn: Connection, selector: str) -> list[RunView]:
    """The runs a selector names (see the module's docstring); an empty match is an error."""
    spec = selector.strip()
    if spec == LAST_OK:
        raise HistoryError(f"'{LAST_OK}' needs a candidate: it is the gate's baseline selector")
    if _IDS.fullmatch(spec):
        return with_series(conn, runs_by_id(conn, run_ids(spec)))
    name = spec[len("tag:"):] if spec.startswith("tag:") else spec
    if not name:
        raise HistoryError("an empty selector: give run ids (42 or 42,43) or a tag (tag:NAME)")
    statement = select(runs).where(runs.c.id.in_(select(tags.c.run_id).where(tags.c.tag == tag_name(name))))
    views = [RunView(dict(row._mapping)) for row in conn.execute(statement.order_by(runs.c.run_time, runs.c.id))]
    if not views:
        raise HistoryError(f"selector {one_line(selector, 80)!r} matches no run (no run ids, no run tagged so)")
    return with_series(conn, views)


def last_ok(conn: Connection, candidate: RunView, before: str | None = None) -> RunView | None:
    """The last run usable as a baseline of the candidate's workload, platform, framework and device, at or
    before the candidate; given ``before``, strictly before it (the page skips the group's own repeat runs)."""
    r = candidate.run
    statement = (select(runs).where(runs.c.workload_key == r["workload_key"], runs.c.platform == r["platform"],
                                    runs.c.framework == r["framework"], runs.c.baseline_ok.is_(True),
                                    runs.c.content_hash != r["content_hash"])
                 .order_by(runs.c.run_time.desc(), runs.c.id.desc()).limit(1))
    statement = statement.where(runs.c.device_name.is_(None) if r["device_name"] is None
                                else runs.c.device_name == r["device_name"])
    if before is not None:
        statement = statement.where(runs.c.run_time < before)
    elif r.get("run_time"):
        statement = statement.where(runs.c.run_time <= r["run_time"])
    row = conn.execute(statement).first()
    return with_series(conn, [RunView(dict(row._mapping))])[0] if row is not None else None


def count_runs(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).select_from(runs)).scalar_one())


SECTIONS = (("run", "what ran"), ("hardware", "hardware"), ("driver", "driver and CUDA/ROCm"), ("image", "image"),
            ("versions", "framework versions"), ("library", "library versions"), ("profile", "profile"),
            ("settings", "effective settings"), ("env", "environment"), ("workload", "workload"),
            ("fingerprint", "fingerprints"))
METRICS = (("tokens_per_second_per_gpu", "tokens/s/GPU", 1.0, 1, ""), ("tokens_per_second", "tokens/s", 1.0, 1, ""),
           ("median_step_time", "median step time", 1.0, 4, " s"), ("mfu", "MFU (causal)", 100.0, 2, "%"),
           ("tokens_per_kwh", "tokens/kWh", 1.0, 0, ""), ("peak_memory_gb", "peak memory", 1.0, 2, " GiB"))
MISSING = "-"


@dataclass(frozen=True)
class MetricDelta:
    name: str
    title: str
    a: Estimate | None
    b: Estimate | None
    change: Estimate | None  # B / A - 1

    def format(self, scale: float, digits: int, unit: str) -> str:
        a = self.a.format(digits, scale, unit) if self.a else "not measured"
        b = self.b.format(digits, scale, unit) if self.b else "not measured"
        if self.change is None:
            return f"{self.title:<18} A {a} | B {b}"
        c = self.change
        shown = f"{c.value:+.1%}"
        if c.has_interval:
            shown += f" [95% {c.low:+.1%}, {c.high:+.1%}]"  # type: ignore[str-format]
        else:
            shown += " (no interval: one run on a side)"
        return f"{self.title:<18} A {a} | B {b} | B vs A {shown}"


def _side_value(views: list[RunView], key: str) -> str:
    counts = Counter(_text(v.details.get(key, MISSING)) for v in views)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{value} x{n}" for value, n in sorted(counts.items()))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return one_line(value, 120)


def fact_differences(a: list[RunView], b: list[RunView]) -> list[SettingDifference]:
    """Every recorded fact whose values differ between the sides, in :data:`SECTIONS` order."""
    keys = sorted({k for v in a + b for k in v.details})
    order = {prefix: i for i, (prefix, _) in enumerate(SECTIONS)}
    keys.sort(key=lambda k: (order.get(k.split(".", 1)[0], len(order)), k))
    return [SettingDifference(key, _side_value(a, key), _side_value(b, key)) for key in keys
            if {_text(v.details.get(key, MISSING)) for v in a} != {_text(v.details.get(key, MISSING)) for v in b}]


def metric_deltas(a: list[RunView], b: list[RunView]) -> list[MetricDelta]:
    """Median and 95% interval of each side's ok runs, and B against A."""
    out = []
    for name, title, *_ in METRICS:
        va = [v.run[name] for v in a if v.run["status"] == "ok" and v.run.get(name) is not None]
        vb = [v.run[name] for v in b if v.run["status"] == "ok" and v.run.get(name) is not None]
        ratio = ratio_estimate(vb, va)
        change = None if ratio is None else Estimate(
            ratio.value - 1, None if ratio.low is None else ratio.low - 1,
            None if ratio.high is None else ratio.high - 1, ratio.n)
        out.append(MetricDelta(name, title, estimate(va), estimate(vb), change))
    return out


def render_diff(a: list[RunView], b: list[RunView], a_name: str, b_name: str) -> str:
    """The diff as text: the two sides, what differs (by section), then the metrics."""
    lines = [f"A = {one_line(a_name, 80)}: {len(a)} run(s): " + ", ".join(v.label for v in a[:6])
             + (" ..." if len(a) > 6 else ""),
             f"B = {one_line(b_name, 80)}: {len(b)} run(s): " + ", ".join(v.label for v in b[:6])
             + (" ..." if len(b) > 6 else "")]
    for side, views in (("A", a), ("B", b)):
        not_ok = [v for v in views if v.run["status"] != "ok"]
        if not_ok:
            lines.append(f"{side}: {len(not_ok)} run(s) not ok, left out of the metrics: "
                         + ", ".join(f"{v.label} ({v.run['status']})" for v in not_ok[:5]))
    differences = fact_differences(a, b)
    lines.append("")
    lines.append(f"What differs ({len(differences)} fact(s)):" if differences else
                 "What differs: nothing recorded differs (same hardware, versions, settings and workload)")
    titles = dict(SECTIONS)
    current = None
    for diff in differences:
        section = diff.key.split(".", 1)[0]
        if section != current:
            lines.append(f"  [{titles.get(section, section)}]")
            current = section
        lines.append(f"    {one_line(diff.key, 80)}: A {diff.first} | B {diff.second}")
    lines.append("")
    lines.append("Metrics (ok runs; median [95% interval over repeated runs]):")
    for delta, (_, _, scale, digits, unit) in zip(metric_deltas(a, b), METRICS, strict=True):
        if delta.a is None and delta.b is None:
            continue
        lines.append("  " + delta.format(scale, digits, unit))
    return "\n".join(lines)
