"""What MLPerf's table does not say, from the imported runs: the AMD/NVIDIA ratio and why, the recipes, the spread.

One :class:`View` per benchmark and round: each system's runs with MLPerf's score and tprimat's median and interval,
the fastest AMD against the fastest NVIDIA system per GPU count, and their recipes judged by MLPerf's rules.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluate.analysis.results import LoadedResult
from evaluate.analysis.stats import Estimate, estimate, ratio_estimate
from train.profiles.mlperf import MODEL, RULES_COMMIT
from utils.result.mllog import rcp_point


@dataclass(frozen=True)
class Rule:
    """One recipe key of the fairness table: its MLPerf constraint, and whether two values may differ."""

    key: str
    constraint: str
    free: bool
    where: str


RULES = (Rule("GBS", "unconstrained (within the RCPs)", True, "line 324"),
         Rule("LR", "unconstrained (the RCP's for the GBS)", True, "line 332"),
         Rule("warm-up (samples)", "unconstrained", True, "line 330"),
         Rule("end LR", "opt_base_learning_rate x 0.1", False, "line 333"),
         Rule("decay", "cosine to step 1,200,000 - warm-up", False, "lines 331, 337"),
         Rule("seeds", "one random seed per run (stock generators)", True, "'Random numbers'"),
         Rule("precision", "any pre-approved format (fp32, bf16, fp16, fp8, ...)", True, "'Numerical formats'"),
         Rule("nodes x GPUs", "the system's", True, "a system is free"),
         Rule("framework", "the submitter's", True, "a framework is free"))
RULES_SOURCE = f"mlcommons/training_policies {RULES_COMMIT[:8]}: training_rules.adoc"


@dataclass
class System:
    """One system's runs (or the user's own runs of one stack): MLPerf's score and the statistics over its runs."""

    label: str
    platform: str
    accelerator: str
    gpus: int
    runs: list[LoadedResult]
    submitter: str | None = None
    score_min: float | None = None

    @property
    def published(self) -> bool:
        return self.submitter is not None

    def _over(self, figure: Callable[[LoadedResult], float | None]) -> Estimate | None:
        return estimate([v for v in (figure(r) for r in self.runs if r.ok) if v is not None])

    def minutes(self) -> list[float]:
        """Time to train: run_stop - run_start of a published run; of the user's own run, its time to target."""
        seconds = [(r.result.performance_metrics.total_time_seconds if r.result.performance_metrics else None)
                   if self.published else (r.result.quality.time_to_target_s if r.result.quality else None)
                   for r in self.runs if r.ok]
        return [s / 60 for s in seconds if s]

    @property
    def time(self) -> Estimate | None:
        return estimate(self.minutes())

    @property
    def samples(self) -> Estimate | None:
        return self._over(lambda r: r.result.quality.samples_to_target if r.result.quality else None)

    @property
    def rate(self) -> Estimate | None:
        """Samples per second over the time to train."""
        return self._over(lambda r: (r.result.performance_metrics.tokens_per_second or 0)
                          / r.result.training_config.sequence_length if r.result.performance_metrics
                          and r.result.training_config.sequence_length else None)

    def recipe(self) -> dict[str, str]:
        """The fairness table's keys as this system ran them (its first run's; seeds over all runs)."""
        first = self.runs[0].result
        w, published = first.training_config.workload, first.published
        seeds = {r.result.training_config.workload.SEED for r in self.runs}
        notes = published.notes if published else first.training_config.precision_effective or ""
        warmup = w.WARMUP_STEPS * w.GBS if w.WARMUP_STEPS is not None and w.GBS else None
        return {"GBS": _shown(w.GBS), "LR": _shown(w.LR), "warm-up (samples)": _shown(warmup),
                "end LR": _shown(w.MIN_LR), "decay": _shown(w.LR_DECAY),
                "seeds": f"{len(seeds)} distinct of {len(self.runs)}",
                "precision": w.PRECISION or (f"notes: {notes}" if notes else "not stated"),
                "nodes x GPUs": f"{first.training_config.nnodes or '?'} x {first.training_config.gpus_per_node or '?'}",
                "framework": published.framework if published else first.framework}


def _shown(value: Any) -> str:
    return "not stated" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Pair:
    """The fastest AMD and NVIDIA systems at one GPU count: the time ratio and its two factors."""

    gpus: int
    amd: System
    nvd: System
    time: Estimate | None
    samples: Estimate | None
    rate: Estimate | None  # NVIDIA's samples/s over AMD's: above 1, AMD is slower per sample

    def fairness(self, benchmark: str, ruleset: str) -> list[list[str]]:
        """One row per key: both values, whether a difference is allowed, and for GBS whether MLPerf has an RCP."""
        a, b = self.amd.recipe(), self.nvd.recipe()
        rows = []
        for rule in RULES:
            same = a[rule.key] == b[rule.key] or rule.key == "seeds"
            judged = "same" if same else "differ: allowed" if rule.free else "differ: NOT allowed"
            if rule.key == "end LR" and not same:
                judged = _end_lr(self.amd) + "; " + _end_lr(self.nvd)
            if rule.key == "GBS":
                judged += "; " + "; ".join(f"GBS {g}: {rcp_point(int(g), ruleset).kind}" for g in sorted({a["GBS"],
                                                                                                     b["GBS"]})
                                           if g.isdigit())
            rows.append([rule.key, a[rule.key], b[rule.key], judged, f"{rule.constraint} ({rule.where})"])
        return rows


def _end_lr(system: System) -> str:
    w = system.runs[0].result.training_config.workload
    if w.LR is None or w.MIN_LR is None:
        return f"{system.label}: not stated"
    ok = abs(w.MIN_LR - 0.1 * w.LR) <= 1e-9 * max(w.LR, 1e-12)
    return f"{system.platform.upper()}: {'= 0.1 x LR (allowed)' if ok else 'not 0.1 x LR (NOT allowed)'}"


@dataclass
class View:
    """One benchmark of one round, with the user's own runs of the same model."""

    benchmark: str
    round: str
    systems: list[System]
    prices: dict[str, float] = field(default_factory=dict)

    @property
    def ruleset(self) -> str:
        return f"{self.round}.0" if self.round.count(".") == 1 else "6.0.0"

    def pairs(self) -> list[Pair]:
        pairs = []
        for gpus in sorted({s.gpus for s in self.systems if s.published}):
            def fastest(platform: str, gpus: int = gpus) -> System | None:
                ranked = [s for s in self.systems if s.published and s.gpus == gpus and s.platform == platform
                          and s.time is not None]
                return min(ranked, key=lambda s: s.time.value, default=None)  # type: ignore[union-attr]

            a, b = fastest("amd"), fastest("nvd")
            if a is not None and b is not None:
                pairs.append(Pair(gpus, a, b, ratio_estimate(a.minutes(), b.minutes()),
                                  _ratio(a, b, "samples_to_target"), _rate_ratio(b, a)))
        return pairs

    def spread(self) -> list[list[str]]:
        """Per accelerator and GPU count with two submitters or more: MLPerf's scores, fastest to slowest."""
        by_chip: dict[tuple[str, int], list[System]] = defaultdict(list)
        for s in self.systems:
            if s.published and s.score_min is not None:
                by_chip[(s.accelerator, s.gpus)].append(s)
        rows = []
        for (chip, gpus), group in sorted(by_chip.items()):
            if len({s.submitter for s in group}) >= 2:
                low, high = min(s.score_min for s in group), max(s.score_min for s in group)  # type: ignore[type-var]
                rows.append([chip, str(gpus), str(len(group)), f"{low:.2f} .. {high:.2f}", f"{high / low - 1:.1%}"])
        return rows

    def scaling(self) -> list[list[str]]:
        """Each submitter's systems of one accelerator at two GPU counts or more: time and efficiency."""
        families: dict[tuple[str, str], list[System]] = defaultdict(list)
        for s in self.systems:
            if s.published and s.time is not None:
                families[(s.submitter or "", s.accelerator)].append(s)
        rows = []
        for (submitter, chip), group in sorted(families.items()):
            if len({s.gpus for s in group}) < 2:
                continue
            group.sort(key=lambda s: s.gpus)
            base = group[0]
            for s in group:
                speedup = base.time.value / s.time.value  # type: ignore[union-attr]
                rows.append([f"{submitter} {chip}", s.label, str(s.gpus), s.time.format(2),  # type: ignore[union-attr]
                             f"{speedup:.2f}x", f"{speedup * base.gpus / s.gpus:.0%}"])
        return rows

    def cost(self, system: System) -> str:
        price = self.prices.get(system.platform)
        if price is None or system.time is None:
            return "no --price-per-gpu-hour" if price is None else "no time"
        return f"${system.time.value / 60 * system.gpus * price:,.0f}"


def _ratio(a: System, b: System, name: str) -> Estimate | None:
    def values(s: System) -> list[float]:
        return [getattr(r.result.quality, name) for r in s.runs if r.ok and r.result.quality
                and getattr(r.result.quality, name) is not None]

    return ratio_estimate(values(a), values(b))


def _rate_ratio(b: System, a: System) -> Estimate | None:
    def rates(s: System) -> list[float]:
        return [r.result.performance_metrics.tokens_per_second for r in s.runs  # type: ignore[union-attr]
                if r.ok and r.result.performance_metrics and r.result.performance_metrics.tokens_per_second]

    return ratio_estimate(rates(b), rates(a))


def views(results: list[LoadedResult], own: list[LoadedResult], prices: dict[str, float]) -> list[View]:
    """The published results by benchmark and round; the user's own PROFILE=mlperf runs of the benchmark's model
    join each view (compared with nothing: their time is their own machine's)."""
    by_system: dict[tuple[str, str, str, str], list[LoadedResult]] = defaultdict(list)
    for r in results:
        p = r.result.published
        if p is not None:
            by_system[(p.benchmark, p.round, p.submitter, p.system_id)].append(r)
    grouped: dict[tuple[str, str], list[System]] = defaultdict(list)
    for (benchmark, round_, submitter, system_id), runs in sorted(by_system.items()):
        p = runs[0].result.published
        grouped[(benchmark, round_)].append(System(
            f"{submitter} {system_id}", runs[0].platform, p.accelerator, runs[0].result.gpu_info.device_count,  # type: ignore[union-attr]
            runs, submitter, p.score_min))  # type: ignore[union-attr]
    mine: dict[tuple[str, str], list[LoadedResult]] = defaultdict(list)
    for r in own:
        if r.result.profile == "mlperf" and r.result.model == MODEL:
            mine[(r.platform, r.framework)].append(r)
    yours = [System(f"yours: {platform}/{framework}", platform, runs[0].result.gpu_info.device_name or platform,
                    runs[0].result.gpu_info.device_count, runs) for (platform, framework), runs in sorted(mine.items())]
    return [View(benchmark, round_, systems + (yours if benchmark == "llama31_8b" else []), prices)
            for (benchmark, round_), systems in sorted(grouped.items())]

