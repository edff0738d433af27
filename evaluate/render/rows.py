"""The cells and rows of the comparison's tables, shared by every display: compare.md, the console and the page.

One builder per table, so every display shows the same numbers with the same units.
"""

from __future__ import annotations

from typing import Any

from evaluate.analysis.comparison import Comparison
from evaluate.analysis.convergence import Convergence
from evaluate.analysis.results import RunGroup
from evaluate.analysis.settings_diff import ABSENT, SettingDifference
from evaluate.analysis.stats import Estimate
from evaluate.analysis.summary import BestVsBest, GroupSummary, LossParity, QualityRatio, QualitySummary, Ratio
from utils.spec.registry import FRAMEWORKS, display_name

# Frameworks whose identifying code is a Megatron (registry version_fields): their megatron-core is shown.
CORE_FRAMEWORKS = tuple(name for name, fw in FRAMEWORKS.items()
                        if {"megatron_core", "megatron_lm_commit"} & set(fw.version_fields))
KEY_LIBRARIES = ("torch", "megatron-core", "transformer-engine", "transformer_engine", "nemo-toolkit",
                 "nemo_toolkit", "primus", "flash-attn", "flash_attn", "transformers", "lightning", "deepspeed")


def est(value: Estimate | None, digits: int = 1, scale: float = 1.0, missing: str = "n/a", unit: str = "") -> str:
    return value.format(digits, scale, unit) if value is not None else missing


def _mfu(value: Estimate | None, reason: str | None, short: bool = False) -> str:
    if value is None:
        return f"n/a ({reason})" if reason and not short else "n/a"
    return value.format(1, 100.0, "%")


def _not_measured(value: Estimate | None, reason: str | None, digits: int = 1, short: bool = False) -> str:
    if value is not None:
        return est(value, digits)
    return "not measured" if short else f"not measured ({reason or 'no data'})"


def _price(summary: GroupSummary, prices: dict[str, float]) -> str:
    price = prices.get(summary.group.platform)
    if price is None:
        return "no price given"
    cost = summary.cost_per_trillion(price)
    return "$" + est(cost, 0) if cost is not None else "n/a"


def _core(summary: GroupSummary) -> str:
    """The megatron-core beside an NVIDIA framework that runs one: mega and nemo run two (docs/CONFORMANCE.md)."""
    g = summary.group
    if g.platform != "nvd":
        return ""
    versions = sorted({r.result.framework_versions.megatron_core for r in g.runs
                       if r.result.framework_versions.megatron_core and "megatron_core" not in
                       r.result.framework_versions.unknown})
    return f" [core {', '.join(versions)}]" if versions and g.framework in CORE_FRAMEWORKS else ""


def group_name(summary: GroupSummary) -> str:
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
            rows.append([group_name(s), s.group.status_text()] + ["-"] * (len(RESULT_HEADERS) - 2))
            continue
        rows.append([
            group_name(s), s.group.status_text(), est(s.tokens_per_gpu, 1), est(s.step_time, 3),
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
    return [[group_name(s), ref.name, ref.config_text(), f"{ref.tokens_per_second_per_gpu:,.0f}", f"{m.measured:,.1f}",
             m.verdict(), ref.flop_convention,
             f"[{ref.source_title}]({ref.source_url})" + ("" if ref.verified else " (unverified)")]
            for s in groups for m in s.references for ref in [m.reference]]


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
        rows.append([group_name(s), f"{block.title or block.recipe}{borrowed}", block.recipe or "none recorded",
                     str(len(block.settings))])
    return rows


QUALITY_HEADERS = ["platform / framework", "target loss", "reached", "time to target (s)", "tokens to target",
                   "energy to target (kWh)", "GPU-hours", "cost to target"]


def run_name(group: RunGroup) -> str:
    """``AMD Primus (tuned)``: a group as the quality tables and the page name it."""
    return (f"{display_name('platform', group.platform)} {display_name('framework', group.framework)}"
            + (" (tuned)" if group.profile == "tuned" else ""))


def _quality_name(summary: QualitySummary) -> str:
    """A quality table's row name; a stack that did not score the fixed held-out set says so (issue 50)."""
    return run_name(summary.group) + ("" if summary.fixed_set else " (not MLPerf's measure)")


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
            est(q.time_s, 1), est(q.tokens, 0), _not_measured(q.energy_kwh, q.energy_reason, 4, short),
            _not_measured(q.gpu_hours, q.gpu_hours_reason, 4, short),
            "no price given" if price is None else ("$" + est(cost, 2) if cost is not None else "n/a"),
        ])
    return rows


def quality_ratio_rows(ratios: list[QualityRatio]) -> list[list[str]]:
    return [[_quality_name(r.numerator), _quality_name(r.denominator), r.value.format(3),
             "AMD faster" if r.value.value < 1 else "NVIDIA faster" if r.value.value > 1 else "equal"]
            for r in ratios]


def not_reached_rows(summaries: list[QualitySummary]) -> list[list[str]]:
    return [[name, _quality_name(q), why] for q in summaries for name, why in q.not_reached]


def ratio_rows(ratios: list[Ratio], label: str = "identical") -> list[list[str]]:
    return [[label, group_name(r.numerator), group_name(r.denominator), est(r.value, 3, unit="x"),
             "faster on AMD" if r.value.value > 1 else "faster on NVIDIA" if r.value.value < 1 else "equal"]
            for r in ratios]


def all_ratio_rows(comparison: Comparison, model: str) -> list[list[str]]:
    """The identical configuration's ratios and the tuned best-vs-best one, side by side."""
    rows = ratio_rows(comparison.ratios(model))
    best = comparison.best(model)
    if best is not None:
        rows += ratio_rows([best.ratio], "tuned, best vs best")
    return rows


def setting_text(value: object) -> str:
    return "not recorded (its identical-profile value)" if value is None else str(value)


def difference_rows(best: BestVsBest) -> list[list[str]]:
    return [[d.key, setting_text(d.first), setting_text(d.second)] for d in best.differences]


def parity_rows(parities: list[LossParity]) -> list[list[str]]:
    rows = []
    for p in parities:
        if p.reason:
            rows.append([group_name(p.first), group_name(p.second), "-", "-", "-", f"not computed: {p.reason}"])
        else:
            corr = f"{p.correlation:.4f}" if p.correlation is not None else "n/a (constant curve)"
            gap = f"{p.max_relative_gap:.2%}" if p.max_relative_gap is not None else "n/a"
            rows.append([group_name(p.first), group_name(p.second), str(p.steps), corr, gap, ""])
    return rows


def convergence_rows(checks: list[Convergence]) -> list[list[str]]:
    rows = []
    for c in checks:
        k = c.check
        means = f"{k.tail_means[0]:.4f} / {k.tail_means[1]:.4f}" if k.tail_means else "-"
        rows.append([display_name("model", c.model), group_name(c.first), group_name(c.second), str(k.steps), means,
                     f"{k.gap:.1%}" if k.gap is not None else "-",
                     f"{k.correlation:.3f}" if k.correlation is not None else "-", k.verdict])
    return rows


CONVERGENCE_HEADERS = ["model", "first", "second", "measured steps", "mean loss, last 20%", "gap", "correlation",
                       "verdict"]


def framework_rows(groups: list[GroupSummary]) -> list[list[str]]:
    """One platform's frameworks side by side."""
    rows = []
    for s in groups:
        final = f"{s.final_loss:.4f}" if s.final_loss is not None else "n/a"
        total = f"{s.step_time_total_s:,.1f}s" if s.step_time_total_s is not None else "n/a"
        tuned = "" if s.group.profile == "identical" else f" ({s.group.profile})"
        rows.append([display_name("framework", s.group.framework) + _core(s) + tuned, s.group.status_text(),
                     est(s.tokens_per_gpu, 1), est(s.avg_step_time, 3), final, total])
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


def settings_tables(differences: list[SettingDifference], shared: bool = True
                    ) -> list[tuple[str, list[str], list[list[str]]]]:
    """(model, headers, rows) per model: one row per differing setting, one column per result; ``shared``: those
    every result has, else those only some have (a framework's own knobs)."""
    differences = [d for d in differences if d.shared == shared]
    tables = []
    for model in sorted({d.model for d in differences}):
        rows_of = [d for d in differences if d.model == model]
        labels = sorted({label for d in rows_of for label in d.values})
        rows = [[d.key, *(str(d.values.get(label, ABSENT)) for label in labels)] for d in rows_of]
        tables.append((model, ["setting", *labels], rows))
    return tables
