"""The comparison, the central model: every result of a folder loaded, summarised and checked once, held in one
:class:`Comparison` that every display reads; a display never computes a figure of its own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from evaluate.analysis.convergence import DEFAULT_BAND, Convergence, convergence_checks
from evaluate.analysis.fairness import FairnessReport, check_fairness
from evaluate.analysis.published import View, views
from evaluate.analysis.results import LoadedResult, find_result_files, load_results
from evaluate.analysis.settings_diff import SettingDifference, settings_differences
from evaluate.analysis.summary import (
    BestVsBest,
    GroupSummary,
    LossParity,
    QualitySummary,
    Ratio,
    best_vs_best,
    cross_platform_parities,
    platform_ratios,
    summarize_group,
    summarize_quality,
)
from utils.io.sanitise import one_line


@dataclass
class Comparison:
    """Everything the report shows, computed once."""

    by_model: dict[str, list[GroupSummary]]
    fairness: FairnessReport
    skipped: list[tuple[Path, str]]
    allow_mismatch: bool
    prices: dict[str, float] = field(default_factory=dict)
    figure_name: str = "compare.png"
    parity_figure_name: str | None = "loss_parity.png"
    settings: list[SettingDifference] = field(default_factory=list)
    convergence: list[Convergence] = field(default_factory=list)
    convergence_band: float = DEFAULT_BAND
    quality_figure_name: str | None = "quality.png"  # evaluate/render/quality_plot.py, beside compare.png
    published: list[View] = field(default_factory=list)  # MLPerf's published runs, imported: apart (evaluate/mlperf/)

    @property
    def converged(self) -> bool:
        """False when any pair of loss curves diverges (the comparison is then marked not fair)."""
        return all(c.check.fair is not False for c in self.convergence)

    @property
    def platforms(self) -> list[str]:
        return sorted({s.group.platform for groups in self.by_model.values() for s in groups})

    @property
    def single_platform(self) -> bool:
        return len(self.platforms) == 1

    @property
    def runs(self) -> list[LoadedResult]:
        """Every compared run, ok or not, model by model."""
        return [run for groups in self.by_model.values() for summary in groups for run in summary.group.runs]

    def ratios(self, model: str) -> list[Ratio]:
        """The identical configuration's AMD/NVIDIA ratios (every framework pair)."""
        return platform_ratios(self.by_model[model], profile="identical")

    def best(self, model: str) -> BestVsBest | None:
        """The tuned profile's best-vs-best ratio: each vendor's fastest tuned run."""
        return best_vs_best(self.by_model[model])

    def parities(self, model: str) -> list[LossParity]:
        return cross_platform_parities(self.by_model[model])

    def quality(self, model: str) -> list[QualitySummary]:
        """Time to quality per group of ``model``: only the groups that evaluated."""
        return [q for q in (summarize_quality(s.group) for s in self.by_model[model]) if q is not None]

    def all_parities(self) -> list[LossParity]:
        return [p for model in sorted(self.by_model) for p in self.parities(model)]


def build_comparison(results_dir: Path, allow_mismatch: bool, prices: dict[str, float],
                     band: float = DEFAULT_BAND) -> Comparison | None:
    """Load and summarize; None when there is no valid result (the caller explains). Each file left out is named
    on stderr with its reason."""
    loaded = load_results(find_result_files(results_dir))
    for path, reason in loaded.skipped:
        print(f"warning: skipping {one_line(path, 400)}: {reason}", file=sys.stderr)
    if loaded.skipped:
        total = len(loaded.skipped) + len(loaded.results)
        print(f"compare: skipped {len(loaded.skipped)} of {total} result file(s); comparing the other "
              f"{len(loaded.results)}", file=sys.stderr)
    for copy, original in loaded.duplicates:
        print(f"compare: {one_line(copy.name, 200)} is the same run as {one_line(original.name, 200)} (same start, "
              "arrays and figures): counted once", file=sys.stderr)
    if not loaded.results:
        return None
    # a published run is no tprimat workload: it is judged by MLPerf's rules in its own view, never in a group here
    published = [r for r in loaded.results if r.result.published is not None]
    loaded.results = [r for r in loaded.results if r.result.published is None]
    by_model = {model: [summarize_group(g) for g in groups] for model, groups in loaded.groups().items()}
    return Comparison(by_model=by_model, fairness=check_fairness(loaded.results), skipped=loaded.skipped,
                      allow_mismatch=allow_mismatch, prices=prices, settings=settings_differences(loaded.results),
                      convergence=convergence_checks(by_model, band=band), convergence_band=band,
                      published=views(published, loaded.results, prices))
