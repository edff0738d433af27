"""The regression gate's rules applied: a candidate run against a baseline of stored runs, one line per check.

Each rule and threshold is a gate row of ``train/settings/rules.json``. What cannot be judged says so and is no
failure; a selector naming no usable baseline run, or runs of several workloads, is refused in one line.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from evaluate.analysis.stats import pearson
from evaluate.history.gate_report import WORDS
from evaluate.history.noise import curve_gaps, tolerance
from evaluate.history.query import RunView
from evaluate.history.target import HistoryError
from train.settings.rules import RULES
from utils.io.sanitise import one_line

THROUGHPUT = "tokens_per_second_per_gpu"  # the gate rule's key and the stored run's column
DEFAULT_FLOOR: float = RULES[THROUGHPUT].ref
MIN_STEPS: int = RULES["loss"].ref
INIT_FACTS = ("workload.INIT_STD", "workload.SEED", "settings.init_method_std", "settings.output_layer_init_method_std")


@dataclass(frozen=True)
class GateSettings:
    throughput_floor: float = DEFAULT_FLOOR
    spread: str = "range"  # range | off
    check_loss: bool = True
    cross_vendor: bool = False
    step_tolerance: float = field(default_factory=lambda: tolerance()[0])
    tail_tolerance: float = field(default_factory=lambda: tolerance()[1])


@dataclass(frozen=True)
class Check:
    """One rule's outcome: ``passed`` True, False, or None (could not be judged), and the line that says it."""

    metric: str
    passed: bool | None
    line: str

    @property
    def shown(self) -> str:
        return f"{WORDS[self.passed].upper()} {self.line}"


@dataclass
class Verdict:
    candidate: RunView
    baseline: list[RunView]
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.passed is False]


def usable_baseline(views: list[RunView], selector: str) -> list[RunView]:
    """The runs of ``views`` that may serve as a baseline; refused when none may or they span workloads."""
    usable = [v for v in views if v.run["baseline_ok"]]
    if not usable:
        reasons = "; ".join(f"{v.label}: {one_line(v.run['baseline_reason'])}" for v in views[:3])
        raise HistoryError(f"baseline {one_line(selector, 80)!r} has no run usable as a baseline ({reasons}): "
                           "failed, incomplete or non-finite runs are never a baseline")
    workloads = {v.run["workload_key"] for v in usable}
    if len(workloads) > 1:
        raise HistoryError(f"baseline {one_line(selector, 80)!r} matches {len(workloads)} workloads; name runs of "
                           "one workload (run ids or a tag)")
    return usable


def _tolerance_at(loss: float) -> tuple[float, str]:
    *above, (_, otherwise) = RULES["loss per-step tolerance"].ref
    for bound, value in above:
        if loss > bound:
            return value, f"loss > {bound}"
    return otherwise, f"loss <= {above[-1][0]}"


def check_throughput(candidate: RunView, baseline: list[RunView], settings: GateSettings) -> Check:
    values = [v.run[THROUGHPUT] for v in baseline]
    base = statistics.median(values)
    got = candidate.run.get(THROUGHPUT)
    if got is None:
        return Check(THROUGHPUT, False, f"{THROUGHPUT}: candidate not measured (null) vs baseline {base:,.1f}")
    spread = (max(values) - min(values)) / base if len(values) >= 2 and settings.spread == "range" and base else None
    threshold = max(settings.throughput_floor, spread or 0.0)
    change = got / base - 1 if base else 0.0
    rule = (f"max({settings.throughput_floor:.1%}, baseline spread {spread:.1%})" if spread is not None
            else f"{settings.throughput_floor:.1%}" + (" (one baseline run: no measured spread)"
                                                       if len(values) < 2 else ""))
    line = (f"{THROUGHPUT}: candidate {got:,.1f} vs baseline {base:,.1f} (median of {len(values)} run(s)): "
            f"{change:+.1%}, threshold -{threshold:.1%} = {rule}")
    return Check(THROUGHPUT, change >= -threshold, line)


def _golden(baseline: list[RunView]) -> dict[int, float]:
    """Per step, the mean loss of the baseline runs, at the steps every one of them recorded finite."""
    curves = [v.loss_by_step() for v in baseline]
    steps = set(curves[0]).intersection(*curves[1:])
    return {s: statistics.fmean(c[s] for c in curves) for s in sorted(steps)  # type: ignore[misc]
            if all(c[s] is not None for c in curves)}


def _comparable(candidate: RunView, baseline: list[RunView]) -> str | None:
    """Why the loss curves cannot be compared (another data, tokenizer or sample order), or None."""
    mine = candidate.details
    for key, what in (("fingerprint.data", "data"), ("fingerprint.tokenizer", "tokenizer")):
        theirs = {v.details.get(key) for v in baseline}
        if mine.get(key) is not None and None not in theirs and theirs != {mine.get(key)}:
            return f"{what} fingerprint differs from the baseline's: loss curves are not comparable"
    digests = {v.run.get("samples_digest") for v in baseline}
    if candidate.run.get("samples_digest") and None not in digests and digests != {candidate.run["samples_digest"]}:
        return "samples digest differs from the baseline's: the runs did not train on the same samples"
    return None


def _aligned(candidate: RunView, golden: dict[int, float]) -> tuple[list[int], list[float], list[float]] | Check:
    mine = candidate.loss_by_step()
    steps = [s for s in golden if s in mine]
    bad = [s for s in steps if mine[s] is None]
    if bad:
        return Check("loss", False, f"loss: candidate loss not finite at {len(bad)} step(s) (first: step {bad[0]})")
    if len(steps) < MIN_STEPS:
        return Check("loss", None, f"loss: {len(steps)} common step(s) with the baseline, at least {MIN_STEPS} needed")
    return steps, [mine[s] for s in steps], [golden[s] for s in steps]  # type: ignore[misc]


def _correlation_check(a: list[float], b: list[float], metric: str = "loss correlation") -> Check:
    r = pearson(a, b)
    if r is None:
        same = all(x == y for x, y in zip(a, b, strict=True))
        return Check(metric, True if same else None,
                     f"{metric}: undefined (a constant curve)" + ("; the curves are identical" if same else ""))
    least = RULES[metric].ref
    return Check(metric, r >= least, f"{metric}: Pearson r {r:.4f}, threshold >= {least}")


def check_loss(candidate: RunView, baseline: list[RunView]) -> list[Check]:
    """Megatron-Bridge's three rules (see the module's docstring) against the baseline's mean curve."""
    reason = _comparable(candidate, baseline)
    if reason:
        return [Check("loss", None, f"loss: {reason}")]
    aligned = _aligned(candidate, _golden(baseline))
    if isinstance(aligned, Check):
        return [aligned]
    steps, mine, golden = aligned
    checks = [_correlation_check(mine, golden)]
    outside = []
    for step, got, want in zip(steps, mine, golden, strict=True):
        allowed, band = _tolerance_at(want)
        gap = abs(got - want) / abs(want) if want else abs(got)
        if gap > allowed:
            outside.append((gap - allowed, step, got, want, gap, allowed, band))
    ratio = len(outside) / len(steps)
    if outside:
        _, step, got, want, gap, allowed, band = max(outside)
        worst = (f"; worst step {step}: candidate {got:.4f} vs baseline {want:.4f} ({gap:.1%}, tolerance "
                 f"{allowed:.0%} for {band})")
    else:
        worst = ""
    share, final = RULES["loss per-step"].ref, RULES["final loss"].ref
    checks.append(Check("loss per-step", ratio <= share,
                        f"loss per-step: {len(outside)} of {len(steps)} step(s) ({ratio:.1%}) outside the tolerance "
                        f"by loss magnitude, at most {share:.0%} allowed{worst}"))
    final_gap = abs(mine[-1] - golden[-1]) / abs(golden[-1]) if golden[-1] else abs(mine[-1])
    checks.append(Check("final loss", final_gap <= final,
                        f"final loss (step {steps[-1]}): candidate {mine[-1]:.4f} vs baseline {golden[-1]:.4f}: "
                        f"{final_gap:.2%}, threshold {final:.0%}"))
    return checks


def cross_vendor_problem(candidate: RunView, baseline: list[RunView]) -> str | None:
    """Why an equivalence cannot be shown between the candidate and the baseline (None: it can be judged)."""
    c = candidate.run
    platforms = {v.run["platform"] for v in baseline}
    if c["platform"] in platforms:
        return f"candidate and baseline both ran on {c['platform']}: a cross-vendor check compares two platforms"
    copy = next((v for v in baseline if (v.step_times, v.losses) == (candidate.step_times, candidate.losses)), None)
    if copy is not None and candidate.step_times:
        return f"the candidate's step times and losses are {copy.label}'s own: one run relabelled, not two platforms"
    if {v.run["workload_key"] for v in baseline} != {c["workload_key"]}:
        return "candidate and baseline are different workloads"
    digests = {v.run.get("samples_digest") for v in baseline} | {c.get("samples_digest")}
    if None in digests:
        return "the samples digest is not recorded on every run: the same tokens cannot be shown"
    if len(digests) > 1:
        return "samples digests differ: the runs did not train on the same samples"
    for key in INIT_FACTS:
        values = {v.details.get(key) for v in [candidate, *baseline]}
        if len(values) > 1:
            return f"initialisation differs ({key}: {', '.join(sorted(one_line(v, 60) for v in values))})"
    for key in ("fingerprint.data", "fingerprint.tokenizer"):
        values = {v.details.get(key) for v in [candidate, *baseline]}
        if len(values) > 1:
            return f"{key} differs: not the same data and tokenizer"
    return None


def check_cross_vendor(candidate: RunView, baseline: list[RunView], settings: GateSettings) -> list[Check]:
    aligned = _aligned(candidate, _golden(baseline))
    if isinstance(aligned, Check):
        return [aligned]
    steps, mine, golden = aligned
    gaps = curve_gaps(steps, mine, golden)
    return [
        _correlation_check(mine, golden, "cross-vendor loss correlation"),
        Check("cross-vendor step gap", gaps.max_step_gap <= settings.step_tolerance,
              f"cross-vendor step gap: largest {gaps.max_step_gap:.2%} at step {gaps.max_step}, tolerance "
              f"{settings.step_tolerance:.2%} (largest measured or published drift, evaluate/history/noise.py)"),
        Check("cross-vendor tail gap", gaps.tail_gap <= settings.tail_tolerance,
              f"cross-vendor tail gap: mean loss over the last {min(10, len(steps))} step(s) differs by "
              f"{gaps.tail_gap:.3%}, tolerance {settings.tail_tolerance:.3%}"),
    ]


def judge(candidate: RunView, baseline: list[RunView], settings: GateSettings) -> Verdict:
    """Every check of ``candidate`` against ``baseline`` (already usable and of one workload)."""
    verdict = Verdict(candidate, baseline)
    c = candidate.run
    if settings.cross_vendor:
        problem = cross_vendor_problem(candidate, baseline)
        if problem:
            raise HistoryError(f"cross-vendor gate of {candidate.label}: {problem}")
        verdict.checks += check_cross_vendor(candidate, baseline, settings)
        return verdict
    if {v.run["workload_key"] for v in baseline} != {c["workload_key"]}:
        raise HistoryError(f"candidate {candidate.label} is another workload than the baseline "
                           f"({baseline[0].label}): compare like with like")
    others = {(v.run["platform"], v.run["framework"]) for v in baseline} - {(c["platform"], c["framework"])}
    if others:
        raise HistoryError(f"candidate {candidate.label} and baseline {baseline[0].label} ran different platforms or "
                           "frameworks (use --cross-vendor for AMD against NVIDIA loss equivalence)")
    if c["status"] != RULES["status"].ref:
        verdict.checks.append(Check("status", False, f"status: candidate is {c['status']} "
                                                     f"({one_line(c.get('error'), 200)}), an ok run was expected"))
    devices = {v.run["device_name"] for v in baseline}
    if devices != {c["device_name"]}:
        verdict.checks.append(Check("device", None, f"device: candidate on {one_line(c['device_name'], 60)}, baseline "
                                                    f"on {', '.join(sorted(one_line(d, 60) for d in devices if d))}"))
    verdict.checks.append(check_throughput(candidate, baseline, settings))
    if settings.check_loss:
        verdict.checks += check_loss(candidate, baseline)
    return verdict
