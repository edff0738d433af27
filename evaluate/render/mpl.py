"""matplotlib as evaluate/'s figures load it: the Agg backend (files only, no display needed), set once here."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

__all__ = ["Figure"]
