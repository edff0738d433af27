"""The time-to-quality figure: held-out eval loss against wall-clock time and against tokens.

The one owner of the eval-loss drawing (compare's ``quality.png`` and the page's panels); the target dashed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaluate.analysis.summary import GroupSummary, model_title
from evaluate.render.mpl import Figure  # the Agg backend
from evaluate.render.plots import PLATFORM_LINES, PLATFORM_MARKERS, SEPARATOR
from utils.spec.registry import display_name, framework_color

if TYPE_CHECKING:
    from matplotlib.axes import Axes

TITLE_TIME = "Eval loss against wall-clock time (s, from the first training step)"
TITLE_TOKENS = "Eval loss against training tokens"
TARGET_COLOR = "#d62728"
ROW_INCHES = 4.2  # one model's row


def evaluated(by_model: dict[str, list[GroupSummary]]) -> bool:
    """Whether any result holds evaluations (else there is no figure to write)."""
    return any(run.result.quality is not None and run.result.quality.evaluations
               for groups in by_model.values() for summary in groups for run in summary.group.runs)


def finite_loss(groups: list[GroupSummary]) -> bool:
    """Whether any run of these groups recorded a finite eval loss (else a figure would be empty boxes)."""
    return any(e.loss is not None for summary in groups for run in summary.group.runs
               if run.result.quality is not None for e in run.result.quality.evaluations)


def draw_model(time_axis: Axes, token_axis: Axes, model: str, groups: list[GroupSummary]) -> None:
    """One model's panels: each evaluated run's eval loss against seconds and tokens, the target dashed."""
    targets: set[float] = set()
    for summary in groups:
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
            shown = [float("nan") if e.loss is None else e.loss for e in quality.evaluations]
            time_axis.plot([e.seconds for e in quality.evaluations], shown, label=label, **style)
            token_axis.plot([e.tokens for e in quality.evaluations], shown, label=label, **style)
    for axis, title in ((time_axis, TITLE_TIME), (token_axis, TITLE_TOKENS)):
        for target in sorted(targets):
            axis.axhline(target, color=TARGET_COLOR, linestyle="--", linewidth=1, label=f"target {target:g}")
        axis.set_title(f"{model_title(model, groups)}: {title}", fontsize=9)
        axis.set_ylabel("eval loss (nats/token)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    time_axis.set_xlabel("seconds")
    token_axis.set_xlabel("tokens")


def _figure(rows: int) -> tuple[Figure, list]:  # type: ignore[type-arg]
    height = ROW_INCHES * rows
    figure = Figure(figsize=(12, height))
    # margins in inches: the axis labels and each row's titles fit without a layout engine
    figure.subplots_adjust(left=0.06, right=0.99, bottom=0.5 / height, top=1 - 0.3 / height, wspace=0.16,
                           hspace=0.8 / ROW_INCHES)
    return figure, figure.subplots(rows, 2, squeeze=False)


def quality_figure(by_model: dict[str, list[GroupSummary]]) -> Figure:
    """Two panels per model (time, tokens), one line per evaluated run, the target as a dashed line."""
    models = sorted(model for model, groups in by_model.items() if evaluated({model: groups}))
    figure, axes = _figure(max(1, len(models)))
    for row, model in enumerate(models):
        draw_model(*axes[row], model, by_model[model])
    return figure


def model_quality_figure(model: str, groups: list[GroupSummary]) -> Figure | None:
    """One model's two panels, for the page; None when no evaluation had a finite loss (the page says so)."""
    if not finite_loss(groups):
        return None
    figure, axes = _figure(1)
    draw_model(*axes[0], model, groups)
    return figure
