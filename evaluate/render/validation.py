"""The validation report as text: one row per file, then every error and warning, the fairness verdict, overall."""

from __future__ import annotations

from evaluate.analysis.validation import ValidationReport
from evaluate.render.tables import console_table
from utils.io.sanitise import one_line


def render_text(report: ValidationReport) -> str:
    rows = []
    for check in report.checks:
        verdict = "valid" if check.ok else "INVALID"
        rows.append([one_line(check.path.name), check.status, verdict, len(check.errors), len(check.warnings)])
    rows += [[one_line(path.name), "-", "UNREADABLE" if path in report.unreadable else "INVALID", 1, 0]
             for path, _ in report.invalid]
    lines = [console_table(["file", "status", "verdict", "errors", "warnings"], rows), ""]
    for check in report.checks:
        for message in check.errors:
            lines.append(f"ERROR   {one_line(check.path.name)}: {message}")
        for message in check.warnings:
            lines.append(f"warning {one_line(check.path.name)}: {message}")
    for path, message in report.invalid:
        lines.append(f"ERROR   {one_line(path.name)}: {message}")
    lines.append("")
    lines.append(f"fairness: {report.fairness.verdict()}")
    lines.extend(f"  - {d.describe()}" for d in report.fairness.differences)
    lines.append(f"overall: {'VALID' if report.ok else 'INVALID'}")
    return "\n".join(lines)
