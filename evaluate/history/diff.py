"""``history diff A B``: what differs between two runs or two groups of runs, beside the metric deltas.

The "why did it change" a user asks first. Each side is a selector (``42``, ``42,43,44``, ``tag:NAME``).
The facts compared are every flat fact the history recorded (``record.details``), in the order a reader
looks for a cause: what ran (platform, framework, model, status), hardware, driver and CUDA/ROCm,
image, framework and library versions, effective settings, environment variables, the workload, the
fingerprints. Only the facts whose values differ between the sides are listed; a group shows each value
with its count (``2.7.0 x2, 2.8.0 x1``), a fact one side did not record shows ``-``.

The metrics are compared on the ok runs of each side: the median of each side with its 95% interval over
repeated runs, and B against A as a relative change with its 95% interval (``evaluate/analysis/stats.py``: Welch's
t-interval on the log ratio); one run on a side has no interval, and says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from evaluate.analysis.stats import Estimate, estimate, ratio_estimate
from evaluate.analysis.summary import SettingDifference
from evaluate.history.query import RunView
from utils.io.sanitise import one_line

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
    found = []
    for key in keys:
        values_a = sorted(_text(v.details.get(key, MISSING)) for v in a)
        values_b = sorted(_text(v.details.get(key, MISSING)) for v in b)
        if set(values_a) != set(values_b):
            found.append(SettingDifference(key, _side_value(a, key), _side_value(b, key)))
    return found


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


def render(a: list[RunView], b: list[RunView], a_name: str, b_name: str) -> str:
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
