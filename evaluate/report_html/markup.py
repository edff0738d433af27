"""Building the page's HTML so that every foreign text is escaped: :class:`Markup` is the only trusted string.

:func:`esc` makes foreign text inert (``utils/io/sanitise.py``) and escapes it; :func:`el` escapes every child that
is not :class:`Markup`; links stay inside the output folder. The CSP forbids every script and request as well.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

import matplotlib

from evaluate.render.mpl import Figure  # the Agg backend
from evaluate.render.tables import CELL_CHARS
from utils.io.sanitise import one_line, safe_text

# No script, no fetch, no font or frame: inline styles and data: images only (the page needs nothing else).
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_NUMBER = re.compile(r"^[-+$]?[\d,]+(\.\d+)?(%|x| ?GiB| s)?( \[.*\]| \(1 run\))?$")


class Markup(str):
    """Text that is already safe HTML: built by this module, never from a foreign string as it is."""


def esc(value: Any) -> Markup:
    """``value`` made inert (utils/io/sanitise.py) and as HTML text (``& < > " '`` escaped); Markup passes
    through, None is empty."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(safe_text("" if value is None else str(value)), quote=True))


def join(parts: Iterable[Any], separator: str = "") -> Markup:
    """Parts (escaped unless Markup) one after the other."""
    return Markup(esc(separator).join(esc(p) for p in parts))


def el(tag: str, *children: Any, **attrs: Any) -> Markup:
    """``<tag attrs>children</tag>``: children escaped unless Markup; ``class_`` is ``class``; None drops an attribute
    (``tag`` and attribute names are literals, never foreign text)."""
    shown = "".join(f' {name.rstrip("_").replace("_", "-")}="{esc(value)}"' for name, value in attrs.items()
                    if value is not None)
    return Markup(f"<{tag}{shown}>{join(children)}</{tag}>")


def para(*children: Any, class_: str | None = None) -> Markup:
    return el("p", *children, class_=class_)


def note(*children: Any) -> Markup:
    """The one line that says why a part of the page is absent (no empty boxes)."""
    return el("p", *children, class_="absent")


def numeric(text: str) -> bool:
    """A cell that reads as a number (``1,234.5``, ``38.1%``, ``1.02x [0.98, 1.06]``): right-aligned."""
    return bool(_NUMBER.match(text.strip()))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], class_: str | None = None) -> Markup:
    """A table of text cells (each one line, escaped); numeric cells right-aligned so figures line up."""
    head = el("tr", *(el("th", h) for h in headers))
    body = []
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, Markup):
                cells.append(el("td", cell))
            else:
                # one inert line per cell, as every table of evaluate/render/tables.py (the same bound)
                text = "n/a" if cell is None else f"{cell:,.2f}" if isinstance(cell, float) \
                    else one_line(cell, CELL_CHARS)
                cells.append(el("td", text, class_="num" if numeric(text) else None))
        body.append(el("tr", *cells))
    return el("table", el("thead", head), el("tbody", *body), class_=class_)


def link(name: str, text: Any = None) -> Markup:
    """A link to a file inside the output folder, by its name relative to the page (percent-encoded)."""
    return el("a", name if text is None else text, href=quote(name, safe="/"))


def details(summary: Any, *children: Any, open_: bool = False) -> Markup:
    return el("details", el("summary", summary), *children, open=("open" if open_ else None))


def svg(figure: Figure) -> Markup:
    """The figure as inline SVG: texts kept as text (searchable, small), no date, no XML prologue."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.find("<svg")
    # matplotlib XML-escapes its texts; sanitising them too keeps a control character out of the page's XML
    return Markup(el("div", Markup(safe_text(text[start:], None)), class_="figure"))
