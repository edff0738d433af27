"""The time-to-quality figure (issue 34): held-out eval loss against wall-clock time and against tokens.

Written by ``python -m evaluate.compare`` as ``quality.png`` beside ``compare.png`` when any result evaluated
(``evaluate/report.py`` links it in ``compare.md``; the HTML page embeds it). One line per run that evaluated
(framework colour, platform line style, as in ``evaluate/plots.py``), the target loss as a horizontal line, a
non-finite evaluation as a gap. Built as a matplotlib ``Figure`` (Agg, no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

from evaluate.analysis import GroupSummary
from evaluate.plots import PLATFORM_LINES, PLATFORM_MARKERS, SEPARATOR
from utils.config.registry import display_name, framework_color

TITLE_TIME = "Eval loss against wall-clock time (s, from the first training step)"
TITLE_TOKENS = "Eval loss against training tokens"
TARGET_COLOR = "#d62728"


def evaluated(by_model: dict[str, list[GroupSummary]]) -> bool:
    """Whether any result holds evaluations (else there is no figure to write)."""
    return any(run.result.quality is not None and run.result.quality.evaluations
               for groups in by_model.values() for summary in groups for run in summary.group.runs)


def quality_figure(by_model: dict[str, list[GroupSummary]]) -> Figure:
    """Two panels per model (time, tokens), one line per evaluated run, the target as a dashed line."""
    models = sorted(model for model, groups in by_model.items() if evaluated({model: groups}))
    figure = Figure(figsize=(12, 4.2 * max(1, len(models))), layout="constrained")
    axes = figure.subplots(max(1, len(models)), 2, squeeze=False)
    for row, model in enumerate(models):
        time_axis, token_axis = axes[row]
        targets: set[float] = set()
        for summary in by_model[model]:
            group = summary.group
            for run in group.runs:
                quality = run.result.quality
                if quality is None or not quality.evaluations:
                    continue
                if quality.target_loss is not None:
                    targets.add(quality.target_loss)
                label = (f"{display_name('platform', group.platform)}{SEPARATOR}"
                         f"{display_name('framework', group.framework)}"
                         + (f" r{run.result.run_index}" if run.result.run_index else ""))
                style = {"color": framework_color(group.framework), "markersize": 3,
                         "linestyle": PLATFORM_LINES.get(group.platform, "-"),
                         "marker": PLATFORM_MARKERS.get(group.platform, "o")}
                losses: Sequence[float | None] = [e.loss for e in quality.evaluations]
                shown = [float("nan") if loss is None else loss for loss in losses]
                time_axis.plot([e.seconds for e in quality.evaluations], shown, label=label, **style)
                token_axis.plot([e.tokens for e in quality.evaluations], shown, label=label, **style)
        for axis, title in ((time_axis, TITLE_TIME), (token_axis, TITLE_TOKENS)):
            for target in sorted(targets):
                axis.axhline(target, color=TARGET_COLOR, linestyle="--", linewidth=1, label=f"target {target:g}")
            axis.set_title(f"{display_name('model', model)}: {title}", fontsize=9)
            axis.set_ylabel("eval loss (nats/token)")
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
        time_axis.set_xlabel("seconds")
        token_axis.set_xlabel("tokens")
    return figure
