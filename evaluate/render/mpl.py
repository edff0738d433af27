"""matplotlib as evaluate/'s figures load it: the Agg backend, and ``Figure`` imported without the property lists.

When matplotlib defines each of its Artist classes (lines, patches, texts, axes and a hundred more), it writes the
docstring of the class's ``set`` method: every settable property with the values it accepts, which
``matplotlib.artist.kwdoc`` builds by reading each setter's docstring (``matplotlib/artist.py``,
``Artist.__init_subclass__``; ``matplotlib/_docstring.py`` for the ``%(Line2D:kwdoc)s`` lists of other
docstrings). That text is for ``help()`` and Sphinx; nothing draws with it, and it is 0.2-0.4 s of the 1.0 s of
CPU that importing ``matplotlib.figure`` takes on the 2-core development machine, where every compare and page
draws (docs/PERFORMANCE.md). So the figure modules (plots.py, frameworks.py, quality_plot.py,
report_html/markup.py, history/trend.py) import :class:`Figure` from here:
``kwdoc`` returns one line during that one import and is restored after it. Every class, default and drawing is
matplotlib's own; only those docstrings are short. Where ``matplotlib.figure`` is already loaded the import
changes nothing.
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
