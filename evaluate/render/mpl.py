"""matplotlib as evaluate/'s figures load it: the Agg backend, and ``Figure`` imported without the property lists.

Defining matplotlib's Artist classes builds every ``set`` docstring (``matplotlib.artist.kwdoc``): 0.2-0.4 s of the
1.0 s CPU of importing ``matplotlib.figure`` on the 2-core VM. Here ``kwdoc`` returns one line during that import.
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
