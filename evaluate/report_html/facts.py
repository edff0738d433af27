"""What the page shows, gathered once: the comparison, the history, the gate's verdicts, each run's files.

A part that may be absent is a value or a one-line reason, never an exception.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.results import LoadedResult
from evaluate.history.gate_report import GateReport
from evaluate.report_html.database import HistoryFacts
from utils.io.json_input import JsonInputError, read_json
from utils.io.sanitise import one_line

GATE_REPORT = "gate.json"  # python -m evaluate.gate --report OUTPUT_DIR/gate.json
TREND_SHOWN = 8  # runs of each series in the page's trend table (the figure has them all)


@dataclass
class GateFacts:
    """The gate's JSON report (``python -m evaluate.gate --report``), or why there is none."""

    absent: str | None = None
    report: GateReport | None = None
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
    try:
        return GateFacts(report=GateReport.model_validate(data), source=path.name)
    except ValidationError:
        return GateFacts(absent=f"the gate report {one_line(path.name, 80)} is not evaluate.gate's report",
                         source=path.name)


def gather(comparison: Comparison, results_dir: Path, history: HistoryFacts, gate_path: Path | None,
           page: Path) -> PageFacts:
    """Every fact of the page written at ``page`` (the results' links are made relative to it)."""
    facts = PageFacts(comparison, results_dir, history, read_gate(gate_path, results_dir))
    facts.logs = log_links(results_dir, comparison.runs)
    href = os.path.relpath(results_dir.resolve(), page.parent.resolve())
    facts.results_href = "" if href == "." else Path(href).as_posix()
    return facts
