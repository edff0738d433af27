"""matplotlib as evaluate/'s figures load it: the Agg backend, and ``Figure`` imported without the property lists.

While matplotlib defines its Artist classes it builds each ``set`` docstring from every setter's docstring
(``matplotlib.artist.kwdoc``): text for ``help()`` that nothing draws with, 0.2-0.4 s of the 1.0 s of CPU that
importing ``matplotlib.figure`` takes on the 2-core VM, paid by every compare and page. So every figure module
imports :class:`Figure` from here, where ``kwdoc`` returns one line during that import and is restored after it.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.artist

_SHORT = "Properties: see matplotlib's documentation (not listed here: evaluate/render/mpl.py)."


def _short_kwdoc(artist: object) -> str:
    return _SHORT


_kwdoc = matplotlib.artist.kwdoc
matplotlib.artist.kwdoc = _short_kwdoc
try:
    from matplotlib.figure import Figure
finally:
    matplotlib.artist.kwdoc = _kwdoc

__all__ = ["Figure"]
