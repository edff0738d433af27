"""The comparison as text: ``compare.md`` and the console summary, from one :class:`Comparison`.

Order of the Markdown report: the fairness verdict first (and, when workloads
differ but ``--allow-mismatch`` was given, a first line that says so), skipped
files, hardware and software per platform, then per model a results table (identical
and tuned runs in separate rows, never averaged together), the recipe each tuned run
ran, the published references, the AMD/NVIDIA ratios side by side (the identical
configuration's, and the tuned profile's best against best) with the settings in which
the two best tuned runs differ, loss-curve parity, and, when only one platform is
present, the frameworks of that platform side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluate.analysis.convergence import DEFAULT_BAND, MIN_CORRELATION, TAIL_FRACTION, Convergence, overall
from evaluate.analysis.fairness import FairnessReport
from evaluate.analysis.results import LoadedResult
from evaluate.analysis.settings_diff import ABSENT, SettingDifference
from evaluate.analysis.stats import INTERVAL_METHOD, RATIO_METHOD, Estimate
from evaluate.analysis.summary import (
    BestVsBest,
    GroupSummary,
    LossParity,
    QualityRatio,
    QualitySummary,
    Ratio,
    best_vs_best,
    cross_platform_parities,
    platform_ratios,
    quality_ratios,
    summarize_quality,
)
from evaluate.render.mlperf import console_lines as mlperf_console
from evaluate.render.mlperf import markdown_lines as mlperf_markdown
from evaluate.render.tables import console_table, markdown_table, table_block
from utils.spec.registry import FRAMEWORKS, display_name

# Frameworks whose identifying code is a Megatron (registry version_fields): their megatron-core is shown.
CORE_FRAMEWORKS = tuple(name for name, fw in FRAMEWORKS.items()
                        if {"megatron_core", "megatron_lm_commit"} & set(fw.version_fields))
MISMATCH_LINE = ("**WARNING: the workloads compared here are NOT identical (compared anyway with --allow-mismatch); "
                 "differences below. Ratios are not a fair hardware comparison.**")
DIVERGED_LINE = ("**WARNING: NOT FAIR: the loss curves of the compared runs diverge (convergence check below); "
                 "their throughput is not a like-for-like comparison.**")
KEY_LIBRARIES = ("torch", "megatron-core", "transformer-engine", "transformer_engine", "nemo-toolkit",
                 "nemo_toolkit", "primus", "flash-attn", "flash_attn", "transformers", "lightning", "deepspeed")


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

    def ratios(self, model: str) -> list[Ratio]:
        """The identical configuration's AMD/NVIDIA ratios (every framework pair)."""
        return platform_ratios(self.by_model[model], profile="identical")

    def best(self, model: str) -> BestVsBest | None:
        """The tuned profile's best-vs-best ratio: each vendor's fastest tuned run."""
        return best_vs_best(self.by_model[model])

    def parities(self, model: str) -> list[LossParity]:
        return cross_platform_parities(self.by_model[model])

    def quality(self, model: str) -> list[QualitySummary]:
        """Time to quality per group of ``model`` (issue 34): only the groups that evaluated."""
        return [q for q in (summarize_quality(s.group) for s in self.by_model[model]) if q is not None]

    @property
    def evaluated(self) -> bool:
        return any(self.quality(model) for model in self.by_model)

    def all_parities(self) -> list[LossParity]:
        return [p for model in sorted(self.by_model) for p in self.parities(model)]


# ---------------------------------------------------------------------------
# cells


def _est(value: Estimate | None, digits: int = 1, scale: float = 1.0, missing: str = "n/a", unit: str = "") -> str:
    return value.format(digits, scale, unit) if value is not None else missing


def _mfu(value: Estimate | None, reason: str | None, short: bool = False) -> str:
    if value is None:
        return f"n/a ({reason})" if reason and not short else "n/a"
    return value.format(1, 100.0, "%")


def _not_measured(value: Estimate | None, reason: str | None, digits: int = 1, short: bool = False) -> str:
    if value is not None:
        return _est(value, digits)
    return "not measured" if short else f"not measured ({reason or 'no data'})"


def _price(summary: GroupSummary, prices: dict[str, float]) -> str:
    price = prices.get(summary.group.platform)
    if price is None:
        return "no price given"
    cost = summary.cost_per_trillion(price)
    return "$" + _est(cost, 0) if cost is not None else "n/a"


def _core(summary: GroupSummary) -> str:
    """The megatron-core beside an NVIDIA framework that runs one: mega and nemo run two (docs/CONFORMANCE.md)."""
    g = summary.group
    if g.platform != "nvd":
        return ""
    versions = sorted({r.result.framework_versions.megatron_core for r in g.runs
                       if r.result.framework_versions.megatron_core and "megatron_core" not in
                       r.result.framework_versions.unknown})
    return f" [core {', '.join(versions)}]" if versions and g.framework in CORE_FRAMEWORKS else ""


def _framework(summary: GroupSummary) -> str:
    g = summary.group
    tuned = "" if g.profile == "identical" else f" ({g.profile})"
    return f"{display_name('platform', g.platform)} {display_name('framework', g.framework)}{_core(summary)}{tuned}"


RESULT_HEADERS = ["platform / framework", "status", "tokens/s/GPU", "median step (s)", "MFU full",
                  "MFU causal", "peak mem (GiB)", "tokens/kWh", "cost per 1T tokens"]


def result_rows(groups: list[GroupSummary], prices: dict[str, float], short: bool = False) -> list[list[str]]:
    """One row per group; ``short`` leaves the reasons for missing values out (the console lists them apart)."""
    rows = []
    for s in groups:
        if not s.group.ok_runs:
            rows.append([_framework(s), s.group.status_text()] + ["-"] * (len(RESULT_HEADERS) - 2))
            continue
        rows.append([
            _framework(s), s.group.status_text(), _est(s.tokens_per_gpu, 1), _est(s.step_time, 3),
            _mfu(s.mfu_full, s.mfu_reason, short), _mfu(s.mfu_causal, s.mfu_reason, short),
            _not_measured(s.peak_memory_gb, s.memory_reason, 2, short),
            _not_measured(s.tokens_per_kwh, s.power_reason, 0, short),
            _price(s, prices),
        ])
    return rows


def failed_rows(groups: list[GroupSummary]) -> list[list[str]]:
    return [[run.path.name, run.status, (run.result.error or "")[:160]]
            for s in groups for run in s.group.not_ok_runs]


def reference_rows(groups: list[GroupSummary]) -> list[list[str]]:
    rows = []
    for s in groups:
        for m in s.references:
            ref = m.reference
            rows.append([_framework(s), ref.name, ref.config_text(), f"{ref.tokens_per_second_per_gpu:,.0f}",
                         f"{m.measured:,.1f}", m.verdict(), ref.flop_convention,
                         f"[{ref.source_title}]({ref.source_url})" + ("" if ref.verified else " (unverified)")])
    return rows


def recipe_rows(groups: list[GroupSummary]) -> list[list[str]]:
    """Each tuned group's recipe, as its first ok run recorded it."""
    rows = []
    for s in groups:
        run = s.representative
        block = run.result.profile_settings if run is not None else None
        if s.group.profile != "tuned" or block is None:
            continue
        borrowed = f" (the {block.borrowed_from} recipe: the vendor publishes none for this model)" \
            if block.borrowed_from else ""
        rows.append([_framework(s), f"{block.title or block.recipe}{borrowed}", block.recipe or "none recorded",
                     str(len(block.settings))])
    return rows


QUALITY_HEADERS = ["platform / framework", "target loss", "reached", "time to target (s)", "tokens to target",
                   "energy to target (kWh)", "GPU-hours", "cost to target"]


def _quality_name(summary: QualitySummary) -> str:
    g = summary.group
    return (f"{display_name('platform', g.platform)} {display_name('framework', g.framework)}"
            + (" (tuned)" if g.profile == "tuned" else ""))


def quality_rows(summaries: list[QualitySummary], prices: dict[str, float], short: bool = False) -> list[list[str]]:
    """One row per group that evaluated: the medians over the runs that reached the target [95% interval]."""
    rows = []
    for q in summaries:
        runs = len(q.group.runs)
        reached = q.time_s.n if q.time_s is not None else 0
        price = prices.get(q.group.platform)
        cost = q.cost(price)
        rows.append([
            _quality_name(q), "n/a" if q.target_loss is None else f"{q.target_loss:g}", f"{reached} of {runs}",
            _est(q.time_s, 1), _est(q.tokens, 0), _not_measured(q.energy_kwh, q.energy_reason, 4, short),
            _not_measured(q.gpu_hours, q.gpu_hours_reason, 4, short),
            "no price given" if price is None else ("$" + _est(cost, 2) if cost is not None else "n/a"),
        ])
    return rows


def quality_ratio_rows(ratios: list[QualityRatio]) -> list[list[str]]:
    return [[_quality_name(r.numerator), _quality_name(r.denominator), r.value.format(3),
             "AMD faster" if r.value.value < 1 else "NVIDIA faster" if r.value.value > 1 else "equal"]
            for r in ratios]


def not_reached_rows(summaries: list[QualitySummary]) -> list[list[str]]:
    return [[name, _quality_name(q), why] for q in summaries for name, why in q.not_reached]


def _verdict(value: float) -> str:
    return "faster on AMD" if value > 1 else "faster on NVIDIA" if value < 1 else "equal"


def ratio_rows(ratios: list[Ratio], label: str = "identical") -> list[list[str]]:
    return [[label, _framework(r.numerator), _framework(r.denominator), _est(r.value, 3, unit="x"),
             _verdict(r.value.value)] for r in ratios]


def all_ratio_rows(comparison: Comparison, model: str) -> list[list[str]]:
    """The identical configuration's ratios and the tuned best-vs-best one, side by side."""
    rows = ratio_rows(comparison.ratios(model))
    best = comparison.best(model)
    if best is not None:
        rows += ratio_rows([best.ratio], "tuned, best vs best")
    return rows


def _setting(value: object) -> str:
    return "not recorded (its identical-profile value)" if value is None else str(value)


def difference_rows(best: BestVsBest) -> list[list[str]]:
    return [[d.key, _setting(d.first), _setting(d.second)] for d in best.differences]


def parity_rows(parities: list[LossParity]) -> list[list[str]]:
    rows = []
    for p in parities:
        if p.reason:
            rows.append([_framework(p.first), _framework(p.second), "-", "-", "-", f"not computed: {p.reason}"])
        else:
            corr = f"{p.correlation:.4f}" if p.correlation is not None else "n/a (constant curve)"
            gap = f"{p.max_relative_gap:.2%}" if p.max_relative_gap is not None else "n/a"
            rows.append([_framework(p.first), _framework(p.second), str(p.steps), corr, gap, ""])
    return rows


def convergence_rows(checks: list[Convergence]) -> list[list[str]]:
    rows = []
    for c in checks:
        k = c.check
        means = f"{k.tail_means[0]:.4f} / {k.tail_means[1]:.4f}" if k.tail_means else "-"
        rows.append([display_name("model", c.model), _framework(c.first), _framework(c.second), str(k.steps), means,
                     f"{k.gap:.1%}" if k.gap is not None else "-",
                     f"{k.correlation:.3f}" if k.correlation is not None else "-", k.verdict])
    return rows


CONVERGENCE_HEADERS = ["model", "first", "second", "measured steps", "mean loss, last 20%", "gap", "correlation",
                       "verdict"]


def framework_rows(groups: list[GroupSummary]) -> list[list[str]]:
    """Seed 004's per-platform view: frameworks side by side."""
    rows = []
    for s in groups:
        final = f"{s.final_loss:.4f}" if s.final_loss is not None else "n/a"
        total = f"{s.step_time_total_s:,.1f}s" if s.step_time_total_s is not None else "n/a"
        tuned = "" if s.group.profile == "identical" else f" ({s.group.profile})"
        rows.append([display_name("framework", s.group.framework) + _core(s) + tuned, s.group.status_text(),
                     _est(s.tokens_per_gpu, 1), _est(s.avg_step_time, 3), final, total])
    return rows


def hardware_rows(comparison: Comparison) -> list[list[Any]]:
    seen: dict[tuple[str, str], list[Any]] = {}
    for groups in comparison.by_model.values():
        for s in groups:
            run = s.representative or (s.group.runs[0] if s.group.runs else None)
            if run is None:
                continue
            gpu, env = run.result.gpu_info, run.result.environment
            lib_text = ", ".join(f"{k} {env.libraries[k]}" for k in KEY_LIBRARIES if k in env.libraries) or "n/a"
            key = (run.platform, s.group.framework)
            seen.setdefault(key, [
                display_name("platform", run.platform), s.group.framework,
                gpu.device_name or gpu.cpu_name or "n/a", gpu.device_count,
                gpu.total_memory_gb, f"{gpu.software_stack} {gpu.software_version or ''}".strip(),
                gpu.driver_version or "n/a", lib_text, env.image.tag or "none recorded",
            ])
    return [seen[k] for k in sorted(seen)]


HARDWARE_HEADERS = ["platform", "framework", "device", "GPUs", "memory (GB)", "stack", "driver", "libraries",
                    "image"]


# ---------------------------------------------------------------------------
# documents


def settings_tables(differences: list[SettingDifference], shared: bool = True
                    ) -> list[tuple[str, list[str], list[list[str]]]]:
    """(model, headers, rows) per model: one row per effective setting that differs, one column per result.

    ``shared``: the settings every compared result has (the differences a reader must see); else
    the settings only some have (a framework's own knobs, kept out of the way).
    """
    differences = [d for d in differences if d.shared == shared]
    tables = []
    for model in sorted({d.model for d in differences}):
        rows_of = [d for d in differences if d.model == model]
        labels = sorted({label for d in rows_of for label in d.values})
        rows = [[d.key, *(str(d.values.get(label, ABSENT)) for label in labels)] for d in rows_of]
        tables.append((model, ["setting", *labels], rows))
    return tables


def markdown(comparison: Comparison) -> str:
    """``compare.md``: the verdicts, what differs, the hardware, one section per model, the method."""
    sections = [_verdicts(comparison), _convergence(comparison), _settings(comparison),
                mlperf_markdown(_all_runs(comparison)), _skipped(comparison),
                _hardware(comparison), *(_model(comparison, model) for model in sorted(comparison.by_model)),
                _parity_figure(comparison), _method(comparison)]
    return "\n".join(line for section in sections for line in section)


def _all_runs(comparison: Comparison) -> list[LoadedResult]:
    return [run for groups in comparison.by_model.values() for summary in groups for run in summary.group.runs]


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
    return [f"## {display_name('model', model)}", "",
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
        lines += [f"Settings that differ between the two tuned runs ({_framework(best.ratio.numerator)} vs "
                  f"{_framework(best.ratio.denominator)}):", "",
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
        lines += [f"Highest throughput: **{_framework(best)}**, {_est(best.tokens_per_gpu)} tokens/s/GPU", ""]
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


def console(comparison: Comparison) -> str:
    lines = []
    if not comparison.fairness.fair:
        lines.append("WARNING: workloads differ; compared anyway (--allow-mismatch)")
    if not comparison.converged:
        lines.append("WARNING: NOT FAIR: the loss curves diverge (see convergence)")
    lines.append(f"fairness: {comparison.fairness.verdict()}")
    lines += [f"  - {d.describe()}" for d in comparison.fairness.differences]
    lines.append(f"convergence: {overall(comparison.convergence)}")
    lines += [f"  - {row[1]} vs {row[2]} ({row[0]}): {row[7]}" for row in convergence_rows(comparison.convergence)]
    lines += mlperf_console(_all_runs(comparison))
    for model, headers, rows in settings_tables(comparison.settings):
        lines += ["", f"effective settings that differ ({display_name('model', model)}):",
                  console_table(headers, rows)]
    own = sum(len(rows) for _, _, rows in settings_tables(comparison.settings, shared=False))
    if own:
        lines.append(f"  ({own} more setting(s) only some frameworks have: compare.md, collapsed)")
    for model in sorted(comparison.by_model):
        groups = comparison.by_model[model]
        title = display_name("model", model)
        rows = result_rows(groups, comparison.prices, short=True)
        lines += ["", f"== {title} ==", console_table(RESULT_HEADERS, rows)]
        summaries = comparison.quality(model)
        if summaries:
            lines += ["time to quality:", console_table(QUALITY_HEADERS, quality_rows(summaries, comparison.prices,
                                                                                      short=True))]
            lines += [f"  not reached: {name} ({label}): {why}" for name, label, why in not_reached_rows(summaries)]
        notes = sorted({f"{what}: {reason}" for s in groups if s.group.ok_runs
                        for what, reason in (("MFU", s.mfu_reason), ("memory", s.memory_reason),
                                             ("power", s.power_reason)) if reason})
        lines += [f"  note: {note}" for note in notes]
        for row in reference_rows(groups):
            lines.append(f"  reference: {row[0]} vs {row[1]} ({row[3]} tokens/s/GPU): {row[5]}")
        for row in ratio_rows(comparison.ratios(model)):
            lines.append(f"  AMD/NVIDIA {row[1]} vs {row[2]}: {row[3]} ({row[4]})")
        best = comparison.best(model)
        if best is not None:
            row = ratio_rows([best.ratio])[0]
            lines.append(f"  AMD/NVIDIA best vs best (tuned) {row[1]} vs {row[2]}: {row[3]} ({row[4]})")
            lines += [f"    {d.key}: {_setting(d.first)} vs {_setting(d.second)}" for d in best.differences]
        for row in parity_rows(comparison.parities(model)):
            detail = row[5] or f"correlation {row[3]}, max relative gap {row[4]} over {row[2]} steps"
            lines.append(f"  loss parity {row[0]} vs {row[1]}: {detail}")
        if comparison.single_platform:
            lines += ["", console_table(["framework", "status", "tokens/s/GPU", "avg step (s)", "final loss",
                                         "total step time"], framework_rows(groups))]
    return "\n".join(lines)
