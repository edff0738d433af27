"""Plain tables for the console and for Markdown, from the same rows.

Numbers are right-aligned in the console so columns of throughput line up; Markdown
gets the same cells so the report and the terminal never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def _numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("%", "").replace("x", "").split(" ")[0]
    try:
        float(stripped)
    except ValueError:
        return False
    return True


def console_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Fixed-width table with a rule under the header; numeric cells right-aligned."""
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join((c.rjust(w) if _numeric(c) else c.ljust(w))
                               for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """GitHub-flavoured Markdown table; ``|`` inside cells is escaped."""
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(_cell(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)
