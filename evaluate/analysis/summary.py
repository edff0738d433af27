"""From run groups to the numbers a report shows: per-group summaries, ratios, loss parity.

Only ``ok`` runs enter a summary; repeated runs give a median and a 95% interval. Two AMD/NVIDIA ratios, never
mixed: identical profile, every framework against every other; tuned, each vendor's fastest (:func:`best_vs_best`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from evaluate.analysis.fairness import RECIPE_KEYS
from evaluate.analysis.references import ReferenceMatch, match_references
from evaluate.analysis.results import LoadedResult, RunGroup
from evaluate.analysis.stats import Estimate, estimate, pearson, ratio_estimate
from utils.io.sanitise import one_line
from utils.schema.block import Scalar
from utils.schema.measures import PerformanceMetrics
from utils.schema.model import Result
from utils.spec.registry import display_name

TOKENS_PER_TRILLION = 1e12


def _known(values: Iterable[float | None]) -> list[float]:
    """The values that were measured (the typed model holds no NaN, only None)."""
    return [float(v) for v in values if v is not None]


def _first(reasons: Iterable[str | None], default: str) -> str:
    return next((reason for reason in reasons if reason), default)


def _perf(result: Result) -> PerformanceMetrics:
    """The performance block of an ``ok`` result (``Result`` refuses status ok without one)."""
    assert result.performance_metrics is not None, "status ok without performance_metrics"
    return result.performance_metrics


@dataclass
class GroupSummary:
    """What one (platform, framework, model) achieved over its ok runs."""

    group: RunGroup
    tokens_per_gpu: Estimate | None
    step_time: Estimate | None  # median step time of each run
    avg_step_time: Estimate | None  # mean step time of each run
    mfu_full: Estimate | None
    mfu_causal: Estimate | None
    mfu_reason: str | None
    peak_memory_gb: Estimate | None
    memory_reason: str | None
    tokens_per_kwh: Estimate | None
    power_reason: str | None
    final_loss: float | None
    step_time_total_s: float | None
    per_run_tokens_per_gpu: list[float] = field(default_factory=list)
    references: list[ReferenceMatch] = field(default_factory=list)

    @property
    def representative(self) -> LoadedResult | None:
        """The first ok run (lowest run index): its curves are plotted, its hardware is shown."""
        ok = self.group.ok_runs
        return ok[0] if ok else None

    def cost_per_trillion(self, price_per_gpu_hour: float | None) -> Estimate | None:
        """Dollars to train on 1e12 tokens at ``price_per_gpu_hour`` per GPU: price / (tokens/s/GPU * 3600) * 1e12."""
        if price_per_gpu_hour is None or self.tokens_per_gpu is None or self.tokens_per_gpu.value <= 0:
            return None  # a zero throughput (a hand-edited file) has no finite cost: shown as n/a

        def cost(tps: float) -> float:
            return price_per_gpu_hour / (tps * 3600.0) * TOKENS_PER_TRILLION

        tpg = self.tokens_per_gpu
        if tpg.has_interval and tpg.low and tpg.low > 0:
            return Estimate(cost(tpg.value), cost(tpg.high), cost(tpg.low), tpg.n)  # type: ignore[arg-type]
        return Estimate(cost(tpg.value), None, None, tpg.n)


def summarize_group(group: RunGroup) -> GroupSummary:
    ok = [run.result for run in group.ok_runs]
    perfs = [_perf(result) for result in ok]
    memories = [result.memory_metrics for result in ok]
    powers = [result.power_metrics for result in ok]
    per_run_tps = _known(p.tokens_per_second_per_gpu for p in perfs)
    mfu_full = _known(p.mfu.full if p.mfu else None for p in perfs)
    peaks = _known(m.peak_allocated_gb if m else None for m in memories)
    kwh = _known(p.tokens_per_kwh if p else None for p in powers)
    finals = [recorded[-1] for recorded in (_known(result.loss_values) for result in ok) if recorded]
    first = ok[0] if ok else None
    summary = GroupSummary(
        group=group,
        tokens_per_gpu=estimate(per_run_tps),
        step_time=estimate(_known(p.median_step_time_seconds for p in perfs)),
        avg_step_time=estimate(_known(p.avg_step_time_seconds for p in perfs)),
        mfu_full=estimate(mfu_full),
        mfu_causal=estimate(_known(p.mfu.causal if p.mfu else None for p in perfs)),
        mfu_reason=None if mfu_full else _first((p.mfu_reason for p in perfs), "not computed"),
        peak_memory_gb=estimate(peaks),
        memory_reason=None if peaks else _first((m.reason if m else None for m in memories), "not measured"),
        tokens_per_kwh=estimate(kwh),
        power_reason=None if kwh else _first((p.reason if p else None for p in powers), "power not measured"),
        final_loss=statistics.median(finals) if finals else None,
        step_time_total_s=sum(t for t in first.step_times if t is not None) if first else None,
        per_run_tokens_per_gpu=per_run_tps,
    )
    if first is not None and summary.tokens_per_gpu is not None:
        summary.references = match_references(first, summary.tokens_per_gpu.value)
    return summary


@dataclass(frozen=True)
class Ratio:
    """AMD / NVIDIA tokens/s/GPU for one pair of frameworks of one model."""

    numerator: GroupSummary
    denominator: GroupSummary
    value: Estimate


def platform_ratios(summaries: list[GroupSummary], top: str = "amd", bottom: str = "nvd",
                    profile: str = "identical") -> list[Ratio]:
    """Every ``top`` group against every ``bottom`` group of the same model and ``profile``, from per-run values."""
    pairs = [(a, b, ratio_estimate(a.per_run_tokens_per_gpu, b.per_run_tokens_per_gpu))
             for a in summaries if a.group.platform == top and a.group.profile == profile
             for b in summaries if b.group.platform == bottom and b.group.profile == profile]
    return [Ratio(a, b, value) for a, b, value in pairs if value is not None]


@dataclass(frozen=True)
class SettingDifference:
    """One setting two tuned runs ran at different values (None: that run did not record it)."""

    key: str
    first: Scalar
    second: Scalar


@dataclass(frozen=True)
class BestVsBest:
    """Each vendor's fastest tuned result of one model, their ratio, and the settings in which they differ."""

    ratio: Ratio
    differences: list[SettingDifference]


def fastest(summaries: list[GroupSummary], platform: str, profile: str = "tuned") -> GroupSummary | None:
    """The group of ``platform`` and ``profile`` with the highest median tokens/s/GPU."""
    candidates = [s for s in summaries if s.group.platform == platform and s.group.profile == profile
                  and s.tokens_per_gpu is not None]
    return max(candidates, key=lambda s: s.tokens_per_gpu.value, default=None)  # type: ignore[union-attr]


def tuned_settings(result: Result) -> dict[str, Scalar]:
    """What a tuned run ran, as far as it recorded: the recipe, its workload keys, the recipe's settings, the
    resolved values of those settings (effective_settings, when the preflight recorded them) and its environment."""
    workload = result.training_config.workload
    block = result.profile_settings
    values: dict[str, Scalar] = {"recipe": block.recipe if block else None,
                                 "precision_effective": result.training_config.precision_effective}
    values.update({key: getattr(workload, key) for key in RECIPE_KEYS})
    values.update({s.key: s.tuned for s in block.settings if s.key not in RECIPE_KEYS} if block else {})
    resolved = result.effective_settings.settings if result.effective_settings is not None else {}
    values.update({key: resolved[key] for key in list(values) if key in resolved})
    values.update({f"env {k}": v for k, v in (block.env if block else {}).items()})
    return values


def setting_differences(first: Result, second: Result) -> list[SettingDifference]:
    """Keys whose values differ (or are recorded by one run only) between two tuned runs."""
    a, b = tuned_settings(first), tuned_settings(second)
    resolved = [r.effective_settings.settings if r.effective_settings is not None else {} for r in (first, second)]
    keys = dict.fromkeys([*a, *b])
    pairs = ((key, a.get(key, resolved[0].get(key)), b.get(key, resolved[1].get(key))) for key in keys)
    return [SettingDifference(key, va, vb) for key, va, vb in pairs if va != vb]


def best_vs_best(summaries: list[GroupSummary], top: str = "amd", bottom: str = "nvd") -> BestVsBest | None:
    """Each vendor's fastest tuned group against the other's, with the settings that differ between them."""
    a, b = fastest(summaries, top), fastest(summaries, bottom)
    if a is None or b is None or a.representative is None or b.representative is None:
        return None
    value = ratio_estimate(a.per_run_tokens_per_gpu, b.per_run_tokens_per_gpu)
    if value is None:
        return None
    return BestVsBest(Ratio(a, b, value), setting_differences(a.representative.result, b.representative.result))


@dataclass(frozen=True)
class LossParity:
    """How closely two platforms' loss curves agree on identical data."""

    first: GroupSummary
    second: GroupSummary
    steps: int
    correlation: float | None
    max_relative_gap: float | None
    reason: str | None  # why parity was not computed


def same_tokens(a: Result, b: Result) -> str | None:
    """None if both runs saw the same tokens in the same order, else why not."""
    for name in ("data", "tokenizer"):
        ha, hb = (getattr(r.fingerprint, name).hash if r.fingerprint is not None else None for r in (a, b))
        if ha is None or hb is None:
            return f"{name} fingerprint missing: identical data cannot be shown"
        if ha != hb:
            return f"{name} differs: loss curves are not comparable"
    wa, wb = a.training_config.workload, b.training_config.workload
    for key in ("SEED", "GBS", "SL"):
        va, vb = getattr(wa, key), getattr(wb, key)
        if va is None or vb is None:
            return f"{key} unknown: identical data order cannot be shown"
        if va != vb:
            return f"{key} differs: loss curves are not comparable"
    return None


def loss_parity(first: GroupSummary, second: GroupSummary) -> LossParity:
    """Pearson correlation and max |a-b|/|b| of the loss curves over their common steps (b = ``second``)."""
    ra, rb = first.representative, second.representative
    if ra is None or rb is None:
        return LossParity(first, second, 0, None, None, "no completed run on one side")
    reason = same_tokens(ra.result, rb.result)
    if reason:
        return LossParity(first, second, 0, None, None, reason)
    pairs = [(x, y) for x, y in zip(ra.result.loss_values, rb.result.loss_values, strict=False)
             if x is not None and y is not None]
    if len(pairs) < 3:
        return LossParity(first, second, len(pairs), None, None, "fewer than 3 common finite loss values")
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    gaps = [abs(x - y) / abs(y) for x, y in pairs if y != 0]
    return LossParity(first, second, len(pairs), pearson(xs, ys), max(gaps) if gaps else None, None)


def cross_platform_parities(summaries: list[GroupSummary]) -> list[LossParity]:
    """Loss parity for every pair of completed groups of one profile on different platforms (AMD, NVIDIA, CPU)."""
    completed = [s for s in summaries if s.representative is not None]
    return [loss_parity(a, b) for i, a in enumerate(completed) for b in completed[i + 1:]
            if a.group.platform != b.group.platform and a.group.profile == b.group.profile]


@dataclass
class QualitySummary:
    """What one group needed to reach its target eval loss, over its ok runs that reached it; every other run
    with a quality block is in ``not_reached`` with its reason, never averaged in. ``fixed_set``: every evaluated
    run scored MLPerf's fixed held-out set; False or None: not MLPerf's measure, never in a ratio with one that is."""

    group: RunGroup
    target_loss: float | None
    time_s: Estimate | None
    tokens: Estimate | None
    energy_kwh: Estimate | None
    energy_reason: str | None
    gpu_hours: Estimate | None
    gpu_hours_reason: str | None
    per_run_time_s: list[float] = field(default_factory=list)
    not_reached: list[tuple[str, str]] = field(default_factory=list)  # (file name, why)
    fixed_set: bool | None = None

    def cost(self, price_per_gpu_hour: float | None) -> Estimate | None:
        """Dollars to the target: GPU-hours to the target x ``price_per_gpu_hour``."""
        hours, scale = self.gpu_hours, price_per_gpu_hour
        if scale is None or hours is None:
            return None
        return Estimate(hours.value * scale, None if hours.low is None else hours.low * scale,
                        None if hours.high is None else hours.high * scale, hours.n)


def _why_not_reached(run: LoadedResult) -> str:
    quality = run.result.quality
    assert quality is not None
    nulls = [e for e in quality.evaluations if e.loss is None]
    if nulls:
        return f"eval loss at step {nulls[0].step} not finite ({nulls[0].loss_reason})"
    if run.result.status != "ok":
        return f"status {run.result.status}: {run.result.error}"
    if quality.target_loss is None:
        return "no TARGET_LOSS set"
    best = min((e.loss for e in quality.evaluations if e.loss is not None), default=None)
    shown = f"; lowest eval loss {best:.4f}" if best is not None else ""
    return f"target {quality.target_loss:g} not reached in {len(quality.evaluations)} evaluation(s){shown}"


def summarize_quality(group: RunGroup) -> QualitySummary | None:
    """The group's time to quality (None: no run of the group evaluated)."""
    evaluated = [run for run in group.runs if run.result.quality is not None]
    if not evaluated:
        return None
    reached = [run.result.quality for run in evaluated if run.ok and run.result.quality.reached]  # type: ignore[union-attr]
    times = _known(q.time_to_target_s for q in reached)
    energy = _known(q.energy_to_target_kwh for q in reached)
    hours = _known(q.gpu_hours_to_target for q in reached)
    targets = {run.result.quality.target_loss for run in evaluated}  # type: ignore[union-attr]
    measures = {run.result.quality.fixed_set for run in evaluated}  # type: ignore[union-attr]
    return QualitySummary(
        group=group, target_loss=targets.pop() if len(targets) == 1 else None,
        time_s=estimate(times), tokens=estimate(_known(q.tokens_to_target for q in reached)),
        energy_kwh=estimate(energy),
        energy_reason=None if energy else _first((q.null_reasons.get("energy_to_target_kwh") for q in reached),
                                                 "no run reached the target"),
        gpu_hours=estimate(hours),
        gpu_hours_reason=None if hours else _first((q.null_reasons.get("gpu_hours_to_target") for q in reached),
                                                   "no run reached the target"),
        per_run_time_s=times,
        not_reached=[(run.path.name, _why_not_reached(run)) for run in evaluated
                     if not (run.ok and run.result.quality.reached)],  # type: ignore[union-attr]
        fixed_set=measures.pop() if len(measures) == 1 else None,
    )


@dataclass(frozen=True)
class QualityRatio:
    """AMD / NVIDIA time to the same target for one pair of frameworks of one model (below 1: AMD is faster)."""

    numerator: QualitySummary
    denominator: QualitySummary
    value: Estimate


def quality_ratios(summaries: list[QualitySummary], top: str = "amd", bottom: str = "nvd") -> list[QualityRatio]:
    """Every ``top`` group against every ``bottom`` group with the same target, profile and held-out measure (a fixed
    set is never set against continuing blocks), from per-run times."""
    pairs = [(a, b, ratio_estimate(a.per_run_time_s, b.per_run_time_s))
             for a in summaries if a.group.platform == top and a.target_loss is not None
             for b in summaries if b.group.platform == bottom and b.group.profile == a.group.profile
             and a.target_loss == b.target_loss and bool(a.fixed_set) == bool(b.fixed_set)]
    return [QualityRatio(a, b, value) for a, b, value in pairs if value is not None]


def model_title(model: str, groups: Iterable[GroupSummary]) -> str:
    """A model as a heading or a figure names it: its runs' own shape when they share one (``Llama 3.1 8B (tiny)``,
    a proxy's label: a tiny cpu run is not the 8B model), else the registry's name of ``model``; one bounded line."""
    names = {run.result.model_shape.display_name for summary in groups for run in summary.group.runs}
    return one_line(names.pop()) if len(names) == 1 else display_name("model", model)
