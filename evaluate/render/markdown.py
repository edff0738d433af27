"""``compare.md``: the comparison as Markdown, from one :class:`~evaluate.analysis.comparison.Comparison`.

Order of the report: the fairness verdict first (and, when workloads differ but ``--allow-mismatch`` was given, a
first line that says so), skipped files, hardware and software per platform, then per model a results table
(identical and tuned runs in separate rows, never averaged together), the recipe each tuned run ran, the published
references, the AMD/NVIDIA ratios side by side (the identical configuration's, and the tuned profile's best against
best) with the settings in which the two best tuned runs differ, loss-curve parity, and, when only one platform is
present, the frameworks of that platform side by side. The cells are evaluate/render/rows.py's, as the console's and
the page's.
"""

from __future__ import annotations

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.convergence import MIN_CORRELATION, TAIL_FRACTION, overall
from evaluate.analysis.stats import INTERVAL_METHOD, RATIO_METHOD
from evaluate.analysis.summary import GroupSummary, model_title, quality_ratios
from evaluate.render.mlperf import markdown_lines as mlperf_markdown
from evaluate.render.mlperf import published_markdown
from evaluate.render.rows import (
    CONVERGENCE_HEADERS,
    HARDWARE_HEADERS,
    QUALITY_HEADERS,
    RESULT_HEADERS,
    all_ratio_rows,
    convergence_rows,
    difference_rows,
    est,
    failed_rows,
    framework_rows,
    group_name,
    hardware_rows,
    not_reached_rows,
    parity_rows,
    quality_ratio_rows,
    quality_rows,
    recipe_rows,
    reference_rows,
    result_rows,
    settings_tables,
)
from evaluate.render.tables import markdown_table, table_block
from utils.spec.registry import display_name

MISMATCH_LINE = ("**WARNING: the workloads compared here are NOT identical (compared anyway with --allow-mismatch); "
                 "differences below. Ratios are not a fair hardware comparison.**")
DIVERGED_LINE = ("**WARNING: NOT FAIR: the loss curves of the compared runs diverge (convergence check below); "
                 "their throughput is not a like-for-like comparison.**")


def markdown(comparison: Comparison) -> str:
    """``compare.md``: the verdicts, what differs, the hardware, one section per model, the method."""
    sections = [_verdicts(comparison), _convergence(comparison), _settings(comparison),
                mlperf_markdown(comparison.runs), _skipped(comparison),
                _hardware(comparison), *(_model(comparison, model) for model in sorted(comparison.by_model)),
                published_markdown(comparison.published), _parity_figure(comparison), _method(comparison)]
    return "\n".join(line for section in sections for line in section)


def _verdicts(comparison: Comparison) -> list[str]:
    fairness = comparison.fairness
    lines: list[str] = []
    if not fairness.fair:
        lines += [MISMATCH_LINE, ""]
    if not comparison.converged:
        lines += [DIVERGED_LINE, ""]
    lines += ["# tprimat comparison", "", f"**Fairness check: {fairness.verdict()}**", "",
              f"**Convergence check: {overall(comparison.convergence)}**", ""]
    if fairness.differences:
        lines += [f"- {d.describe()}" for d in fairness.differences] + [""]
    return lines


def _convergence(comparison: Comparison) -> list[str]:
    if not comparison.convergence:
        return []
    return ["## Convergence of the loss curves", "",
            f"Not fair when the mean loss over the last {TAIL_FRACTION:.0%} of the measured steps differs by "
            f"more than {comparison.convergence_band:.0%} (`--convergence-band`) or the curves' correlation "
            f"is below {MIN_CORRELATION}: runs that do not learn alike are not a like-for-like throughput "
            "comparison.", "", markdown_table(CONVERGENCE_HEADERS, convergence_rows(comparison.convergence)), ""]


def _settings(comparison: Comparison) -> list[str]:
    if not comparison.settings:
        return []
    lines = ["## Effective settings that differ", "",
             "What each framework resolved with its own code before the run: the settings every compared "
             "result has and that differ.", ""]
    shared = settings_tables(comparison.settings)
    for model, headers, rows in shared:
        lines += [f"{display_name('model', model)}:", "", markdown_table(headers, rows), ""]
    if not shared:
        lines += ["None: every setting the compared results all have is the same.", ""]
    own = settings_tables(comparison.settings, shared=False)
    if own:
        count = sum(len(rows) for _, _, rows in own)
        lines += ["<details>", f"<summary>{count} setting(s) only some of the compared frameworks have "
                               "(`-`: not a setting of that framework)</summary>", ""]
        for model, headers, rows in own:
            lines += [f"{display_name('model', model)}:", "", markdown_table(headers, rows), ""]
        lines += ["</details>", ""]
    return lines


def _skipped(comparison: Comparison) -> list[str]:
    if not comparison.skipped:
        return []
    return ["## Skipped files", "", *(f"- `{p.name}`: {reason}" for p, reason in comparison.skipped), ""]


def _hardware(comparison: Comparison) -> list[str]:
    return ["## Hardware and software", "", markdown_table(HARDWARE_HEADERS, hardware_rows(comparison)), "",
            f"![comparison]({comparison.figure_name})", ""]


def _model(comparison: Comparison, model: str) -> list[str]:
    """One model's section: its results, what they ran, the AMD/NVIDIA ratios, one platform's frameworks."""
    groups = comparison.by_model[model]
    return [f"## {model_title(model, groups)}", "",
            markdown_table(RESULT_HEADERS, result_rows(groups, comparison.prices)), "",
            *_model_runs(groups), *_model_ratios(comparison, model), *_model_quality(comparison, model),
            *_model_frameworks(comparison, groups)]


def _model_quality(comparison: Comparison, model: str) -> list[str]:
    """Time to quality (issue 34): time, tokens, energy and cost to the target eval loss, the platforms' ratio."""
    summaries = comparison.quality(model)
    if not summaries:
        return []
    lines = ["### Time to quality", "",
             "Wall time from the first training step to the end of the first held-out evaluation at or below the "
             "target (evaluation time included), and the tokens, energy and GPU-hours to it; medians over the runs "
             "that reached the target [95% interval].", "",
             markdown_table(QUALITY_HEADERS, quality_rows(summaries, comparison.prices)), ""]
    lines += table_block(["AMD", "NVIDIA", "ratio [95% interval]", "verdict"],
                         quality_ratio_rows(quality_ratios(summaries)),
                         "AMD / NVIDIA time to target (below 1: AMD reaches it sooner):")
    lines += table_block(["file", "platform / framework", "why"], not_reached_rows(summaries),
                         "Runs that did not reach the target (not averaged in):")
    if comparison.quality_figure_name:
        lines += [f"![eval loss against time and tokens]({comparison.quality_figure_name})", ""]
    return lines


def _model_runs(groups: list[GroupSummary]) -> list[str]:
    return [*table_block(["file", "status", "reason"], failed_rows(groups), "Runs not counted (failed or incomplete):"),
            *table_block(["result", "recipe", "id", "settings changed"], recipe_rows(groups),
                         "### Tuned runs: the vendor recipe each ran"),
            *table_block(["result", "reference", "reference config", "reference tokens/s/GPU", "measured", "verdict",
                          "FLOP convention", "source"], reference_rows(groups), "### Published references")]


def _model_ratios(comparison: Comparison, model: str) -> list[str]:
    lines = table_block(["profile", "AMD", "NVIDIA", "ratio tokens/s/GPU [95% interval]", "verdict"],
                        all_ratio_rows(comparison, model), "### AMD / NVIDIA throughput ratio",
                        "The identical configuration and each vendor at its best (tuned), side by side; "
                        "the two profiles never share a ratio.")
    best = comparison.best(model)
    if best is not None and best.differences:
        lines += [f"Settings that differ between the two tuned runs ({group_name(best.ratio.numerator)} vs "
                  f"{group_name(best.ratio.denominator)}):", "",
                  markdown_table(["setting", "AMD", "NVIDIA"], difference_rows(best)), ""]
    lines += table_block(["first", "second", "steps", "correlation", "max relative gap", "note"],
                         parity_rows(comparison.parities(model)), "### Loss-curve parity between platforms")
    return lines


def _model_frameworks(comparison: Comparison, groups: list[GroupSummary]) -> list[str]:
    if not comparison.single_platform:
        return []
    platform = display_name("platform", comparison.platforms[0])
    lines = [f"### {platform} frameworks side by side", "",
             markdown_table(["framework", "status", "tokens/s/GPU", "avg step (s)", "final loss",
                             "total step time"], framework_rows(groups)), ""]
    best = max((s for s in groups if s.tokens_per_gpu), key=lambda s: s.tokens_per_gpu.value, default=None)
    if best is not None:
        lines += [f"Highest throughput: **{group_name(best)}**, {est(best.tokens_per_gpu)} tokens/s/GPU", ""]
    return lines


def _parity_figure(comparison: Comparison) -> list[str]:
    if comparison.parity_figure_name and any(p.reason is None for p in comparison.all_parities()):
        return [f"![loss parity]({comparison.parity_figure_name})", ""]
    return []


def _method(comparison: Comparison) -> list[str]:
    prices = (" with " + ", ".join(f"{display_name('platform', k)} ${v:.2f}/GPU-h"
                                   for k, v in sorted(comparison.prices.items())) if comparison.prices
              else " (no --price-per-gpu-hour given)")
    return ["## Method", "",
            f"- Repeated runs: {INTERVAL_METHOD}. Ratios: {RATIO_METHOD}. Failed and incomplete runs are listed, "
            "never averaged in.",
            "- Throughput: GBS x SL / median step time over measured (post-warm-up) steps, per GPU = / world size.",
            "- MFU: achieved FLOP/s per GPU / peak dense FLOP/s of the device, with FLOPs per token from Megatron's "
            "dense formula under full attention and causal-halved attention.",
            f"- Cost per 1T tokens: price per GPU-hour / (tokens/s/GPU x 3600) x 1e12{prices}.",
            "- Time to quality: seconds from the first training step to the end of the first evaluation whose "
            "held-out loss (per-token mean cross-entropy) is at or below TARGET_LOSS, evaluations included; cost "
            "to target = GPU-hours to target x price per GPU-hour. Runs that did not reach it are listed apart.",
            "- Loss parity: Pearson correlation and max |a - b| / |b| of the per-step loss, computed only when both "
            "runs have the same data and tokenizer fingerprints, seed, GBS and SL.",
            "- Profiles: identical runs every vendor stack at config.env's settings (the fairness table); tuned runs "
            "each at its vendor's published recipe (train/profiles/). Runs of the two profiles are never averaged "
            "or divided together: the identical ratio pairs every framework, the tuned one each vendor's fastest "
            "tuned run (best vs best).",
            "- A tuned result below half of a matching published reference is flagged as likely misconfigured.", ""]
