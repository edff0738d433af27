"""compare's MLPerf view: each PROFILE=mlperf run's compliance verdict, vendor pairs whose host settings differ, and
MLPerf's published runs imported (``evaluate/analysis/published.py``): the tables of compare.md and the page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from evaluate.analysis.published import RULES_SOURCE, View
from evaluate.analysis.results import LoadedResult
from evaluate.analysis.stats import Estimate
from evaluate.render.tables import table_block
from utils.machine.host_tunables import COMPARED
from utils.spec.registry import display_name

VERDICT_HEADERS = ["run", "verdict (ruleset of record)", "other rulesets", "complaints", "RCP at its GBS", "MLLOG"]
HOST_HEADERS = ["AMD run", "NVIDIA run", "setting", "AMD", "NVIDIA"]
VENDORS = ("amd", "nvd")


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0].rstrip(":") if message.strip() else message


def verdict_rows(results: Iterable[LoadedResult]) -> list[list[str]]:
    """One row per result that ran PROFILE=mlperf: verdicts, the checker's complaints (first lines), the RCP."""
    rows = []
    for loaded in results:
        block = loaded.result.mlperf
        if loaded.result.profile != "mlperf":
            continue
        label = f"{loaded.platform}/{loaded.framework} {loaded.path.name}"
        if block is None:
            rows.append([label, "no MLLOG", "", "", "", "(result written before MLLOG existed)"])
            continue
        record = block.checks[0] if block.checks else None
        verdict = block.verdict or (f"none ({block.reason or (record.reason if record else 'not checked')})")
        others = ", ".join(f"{c.ruleset}: {c.verdict or 'none'}" for c in block.checks[1:])
        complaints = "; ".join(_first_line(m) for m in record.messages) if record else ""
        rcp = f"{block.rcp.kind} ({block.rcp.note})" if block.rcp else ""
        rows.append([label, f"{verdict} ({block.ruleset_of_record})" if block.verdict else verdict, others,
                     complaints or "none", rcp, block.mllog or "-"])
    return rows


@dataclass(frozen=True)
class HostDifference:
    """An AMD and an NVIDIA run of one model whose hosts were set differently (one setting)."""

    model: str
    amd: str
    nvd: str
    setting: str
    amd_value: str
    nvd_value: str


def _value(loaded: LoadedResult, key: str) -> str:
    tunables = loaded.result.environment.host_tunables
    if tunables is None:
        return "not recorded"
    value = getattr(tunables, key)
    return str(value) if value is not None else f"unreadable ({tunables.unreadable.get(key, 'no reason')})"


def host_differences(results: Iterable[LoadedResult]) -> list[HostDifference]:
    """Every (AMD run, NVIDIA run) pair of one model and profile whose recorded host settings differ, by setting
    (readable on one side only is a difference: the hosts cannot be shown to match)."""
    ok = [r for r in results if r.ok and r.result.environment.host_tunables is not None]
    return [HostDifference(a.model, a.path.name, b.path.name, key, va, vb)
            for a in ok if a.platform == "amd"
            for b in ok if b.platform == "nvd" and b.model == a.model and b.result.profile == a.result.profile
            for key in COMPARED for va, vb in [(_value(a, key), _value(b, key))]
            if va != vb and not (va.startswith("unreadable") and vb.startswith("unreadable"))]


def console_lines(results: list[LoadedResult]) -> list[str]:
    """compare's console lines: the verdict per mlperf run, then host differences between vendor pairs."""
    lines = []
    for row in verdict_rows(results):
        lines.append(f"MLPerf {row[0]}: {row[1]}" + (f"; {row[2]}" if row[2] else "") +
                     (f"; complaints: {row[3]}" if row[3] not in ("", "none") else ""))
    differences = host_differences(results)
    if differences:
        pairs = sorted({(d.amd, d.nvd) for d in differences})
        lines.append(f"WARNING: host settings differ between {len(pairs)} AMD/NVIDIA pair(s) (compare.md lists them):")
        lines += [f"  {d.amd} vs {d.nvd}: {d.setting} {d.amd_value} vs {d.nvd_value}" for d in differences]
    return lines


def markdown_lines(results: list[LoadedResult]) -> list[str]:
    """compare.md's sections: the verdict table, and the host settings that differ between vendor pairs."""
    return [*table_block(VERDICT_HEADERS, verdict_rows(results), "## MLPerf compliance (PROFILE=mlperf)",
                         "MLPerf's own compliance checker (mlperf-logging) on each run's MLLOG, written by tprimat "
                         "from the run's result (README \"MLPerf rules\"). Not a submission: a verdict says whether "
                         "this run's log meets the closed-division rules of the Llama 3.1 8B benchmark."),
            *table_block(HOST_HEADERS, [[d.amd, d.nvd, d.setting, d.amd_value, d.nvd_value]
                                        for d in host_differences(results)],
                         "## Host settings that differ between AMD and NVIDIA runs",
                         "Record only (tprimat changes nothing on a host): the settings MLPerf submitters tune "
                         "(governor, C-states, NUMA balancing, THP, ASLR ...). A pair listed here ran on hosts set "
                         "differently.")]


# MLPerf's published runs, imported

PAIR_HEADERS = ["GPUs", "AMD (fastest)", "NVIDIA (fastest)", "AMD min", "NVIDIA min", "time AMD / NVIDIA",
                "samples to target AMD / NVIDIA", "samples/s NVIDIA / AMD", "the gap is"]
FAIR_HEADERS = ["GPUs", "key", "AMD", "NVIDIA", "judged", "MLPerf closed rule"]
SYSTEM_HEADERS = ["system", "accelerator", "GPUs", "runs", "MLPerf score (min)", "time to train (min)",
                  "samples to target", "samples/s", "tokens/s/GPU", "cost of a training"]
SPREAD_HEADERS = ["accelerator", "GPUs", "systems", "MLPerf scores (min)", "slowest / fastest - 1"]
SCALING_HEADERS = ["family", "system", "GPUs", "time to train (min)", "speed-up", "scaling efficiency"]


def _x(value: Estimate | None) -> str:
    return "-" if value is None else value.format(3, unit="x")


def _reading(samples: Estimate | None, rate: Estimate | None) -> str:
    """Which factor of the time ratio is the larger: convergence (samples) or speed (samples per second)."""
    if samples is None or rate is None:
        return "-"
    conv, speed = abs(math.log(samples.value)), abs(math.log(rate.value))
    return "mostly convergence" if conv > 2 * speed else "mostly speed" if speed > 2 * conv else "both"


def title(view: View) -> str:
    model = display_name("model", "llama") if view.benchmark == "llama31_8b" else view.benchmark
    return f"AMD vs NVIDIA: MLPerf Training v{view.round}, {model} (published runs, imported)"


LEAD = ("What MLPerf's submitters measured and published (their logs, imported by python -m evaluate.mlperf), never "
        "measured by tprimat. MLPerf score: mlperf-logging's summarizer's (olympic mean of the runs, RCP-normalised "
        "where the review published a scaling.json). Times, samples and rates: median of the system's runs, 95% "
        "interval of the mean; a ratio's interval: Welch t on the log ratio. Time to train = samples to the target "
        "/ samples per second, so time AMD / NVIDIA = samples AMD / NVIDIA x samples/s NVIDIA / AMD.")


def published_tables(view: View) -> list[tuple[str, list[str], list[list[str]]]]:
    """The section's tables (title, headers, rows), in reading order; a table without rows is left out."""
    pairs = view.pairs()
    systems = [[s.label, s.accelerator, str(s.gpus), str(len(s.runs)),
                f"{s.score_min:.4f}" if s.score_min is not None else ("tprimat run (yours)" if not s.published
                                                                      else "none"),
                s.time.format(2) if s.time else "-", s.samples.format(0) if s.samples else "-",
                s.rate.format(2) if s.rate else "-",
                _per_gpu(s), view.cost(s)] for s in view.systems]
    tables = [
        ("Time to train, AMD / NVIDIA at equal GPU count", PAIR_HEADERS,
         [[str(p.gpus), p.amd.label, p.nvd.label, p.amd.time.format(2) if p.amd.time else "-",
           p.nvd.time.format(2) if p.nvd.time else "-", _x(p.time), _x(p.samples), _x(p.rate),
           _reading(p.samples, p.rate)] for p in pairs]),
        (f"The recipes of each pair ({RULES_SOURCE}, Hyperparameters)", FAIR_HEADERS,
         [[str(p.gpus), *row] for p in pairs for row in p.fairness(view.benchmark, view.ruleset)]),
        ("Same chip, different submitters", SPREAD_HEADERS, view.spread()),
        ("Scaling: time to train against GPUs", SCALING_HEADERS, view.scaling()),
        ("Every system", SYSTEM_HEADERS, systems)]
    return [t for t in tables if t[2]]


def _per_gpu(system) -> str:  # type: ignore[no-untyped-def]
    rate = system.rate
    if rate is None:
        return "-"
    sl = system.runs[0].result.training_config.sequence_length or 0
    return f"{rate.value * sl / system.gpus:,.0f}"


def published_markdown(views: list[View]) -> list[str]:
    lines: list[str] = []
    for view in views:
        lines += [f"## {title(view)}", "", LEAD, ""]
        for name, headers, rows in published_tables(view):
            lines += table_block(headers, rows, f"### {name}")
    return lines


def published_console(views: list[View]) -> list[str]:
    lines = []
    for view in views:
        lines.append(f"{title(view)}: {len(view.systems)} system(s) (compare.md has the tables)")
        for p in view.pairs():
            lines.append(f"  {p.gpus} GPUs: {p.amd.label} / {p.nvd.label} time to train = {_x(p.time)} "
                         f"(samples {_x(p.samples)}, samples/s NVIDIA/AMD {_x(p.rate)}: "
                         f"{_reading(p.samples, p.rate)})")
    return lines
