"""Tables for the console (through ``rich``) and for Markdown, from the same rows and the same cells.

Console tables are plain text (no colour, no box drawing, nothing wrapped or cut: they end up in logs and CI),
numbers right-aligned; Markdown gets the same cell texts.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from utils.io.sanitise import one_line

# Header underlined with ASCII dashes, no other rules: readable in any log and locale (a rich.box.Box).
PLAIN_HEAD = "    \n    \n -- \n    \n    \n    \n    \n    \n"
RENDER_WIDTH = 10_000  # wide enough that no cell is ever wrapped or cut; trailing padding is stripped


CELL_CHARS = 400  # a cell is one line of at most this many characters (utils/io/sanitise.py)


def _cell(value: Any) -> str:
    """The cell's text, one inert line whatever the value holds: every table, console or Markdown, is safe."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return one_line(value, CELL_CHARS)


def _numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("%", "").replace("x", "").split(" ")[0]
    try:
        float(stripped)
    except ValueError:
        return False
    return True


def console_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain-text table with a dashed rule under the header; numeric cells right-aligned."""
    table = Table(box=box.Box(PLAIN_HEAD, ascii=True), show_edge=False, pad_edge=False, header_style="",
                  highlight=False)
    for header in headers:
        table.add_column(one_line(header, CELL_CHARS), no_wrap=True)
    for row in rows:
        cells = [_cell(c) for c in row]
        table.add_row(*(Text(c, justify="right" if _numeric(c) else "left") for c in cells))
    buffer = io.StringIO()
    Console(file=buffer, width=RENDER_WIDTH, color_system=None, force_terminal=False, highlight=False,
            emoji=False, markup=False).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())


def table_block(headers: Sequence[str], rows: Sequence[Sequence[Any]], *lead: str) -> list[str]:
    """A report's table with the lines that lead into it (a heading, a sentence), each and the table followed by a
    blank line; nothing at all without rows (a report shows no empty table)."""
    if not rows:
        return []
    return [*(line for text in lead for line in (text, "")), markdown_table(headers, rows), ""]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """GitHub-flavoured Markdown table; ``|`` inside cells is escaped (HTML: utils/io/sanitise.py safe_markdown)."""
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(one_line(h, CELL_CHARS)) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(esc(_cell(c)) for c in row) + " |" for row in rows]
    return "\n".join(lines)
