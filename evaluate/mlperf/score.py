"""MLPerf's score of a system, with mlperf-logging's arithmetic, and its checkers on request.

The score is ``mlperf_logging.result_summarizer``'s: the olympic mean of the counted runs' minutes, times the
``scaling.json`` beside the runs. :func:`olympic_mean` is written here because the summarizer's module costs 2.0 s of
CPU to import; its test holds it equal to ``_compute_olympic_average``.
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass

from mlperf_logging.benchmark_meta import get_result_file_counts
from mlperf_logging.compliance_checker import mlp_compliance

from utils.io.json_input import JsonInputError, parse_json
from utils.io.sanitise import one_line

USAGE = "training"
rule_choices = mlp_compliance.rule_choices  # the rulesets mlperf-logging knows (5.1.0 ...)
NOT_CONVERGED = 1e9  # the RCP checker's samples for a run that did not converge


@dataclass
class Counted:
    """Whether one run enters its system's score, and why not."""

    minutes: float | None
    counted: bool
    reason: str = ""


@dataclass
class SystemScore:
    score_min: float | None = None
    reason: str | None = None
    scaling: float = 1.0
    rcp: str | None = None


def max_dropped(benchmark: str) -> int:
    """How many runs the olympic mean may lose (``_compute_strong_score_standalone``'s own rule)."""
    return 4 if benchmark == "unet3d" else 1


def olympic_mean(scores: list[float], dropped: int, most: int) -> float | None:
    """The mean without the ``most`` fastest runs and the ``most - dropped`` slowest (the runs that do not count
    stand for the slowest); None when none is left."""
    kept = sorted(scores)[most:len(scores) - (most - dropped)]
    return sum(kept) / len(kept) if kept else None


def required_runs(benchmark: str) -> int | None:
    return get_result_file_counts(USAGE).get(benchmark)


def scaling_factor(raw: bytes | None, where: str) -> tuple[float, str | None]:
    """The factor of a ``scaling.json`` (1 without one), or 1 and why it is not usable."""
    if raw is None:
        return 1.0, None
    try:
        value = parse_json(raw.decode("utf-8", "replace"), where, max_depth=4).get("scaling_factor")
    except (JsonInputError, AttributeError) as exc:
        return 1.0, f"{where}: not a scaling file ({one_line(exc)}): no normalisation applied"
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or not 0 < value < 100:
        return 1.0, f"{where}: scaling_factor {one_line(value, 40)} is no factor: no normalisation applied"
    return float(value), None


def system_score(benchmark: str, runs: list[Counted], scaling: float) -> SystemScore:
    """The summarizer's score of one system's runs, or why there is none."""
    need, most = required_runs(benchmark), max_dropped(benchmark)
    scores = [r.minutes for r in runs if r.counted and r.minutes is not None]
    dropped = len(runs) - len(scores)
    mean = olympic_mean(scores, dropped, most) if dropped <= most else None
    why = (f"{len(runs)} runs, MLPerf requires {need}: no score (MLPerf publishes none)" if need and len(runs) < need
           else f"{dropped} runs do not count, MLPerf allows {most}: no score" if dropped > most
           else "no run left after the olympic mean's drops: no score" if mean is None else None)
    return SystemScore(None if why else mean * scaling, why, scaling)  # type: ignore[operator]


def rcp_verdict(benchmark: str, ruleset: str, gbs: int | None, samples: list[int | None]) -> str:
    """``rcp_checker.check_directory``'s verdict on these runs (pruned RCPs, as the summarizer runs it)."""
    from mlperf_logging.rcp_checker import rcp_checker  # imports scipy.stats: 1.5 s of CPU, paid by --check alone

    try:
        checker = rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, False)
    except (OSError, KeyError, ValueError) as exc:
        return f"no RCP check: {one_line(exc)}"
    epochs = [float(s) if s is not None else NOT_CONVERGED for s in samples]
    if gbs is None:
        return "Fail: could not detect global_batch_size"
    if sum(s is None for s in samples) > max_dropped(benchmark):
        return "Fail: insufficient convergence"
    record = checker._find_rcp(gbs, "pruned_rcps")
    low, high = checker._find_top_min_rcp(gbs, "pruned_rcps"), checker._find_bottom_max_rcp(gbs, "pruned_rcps")
    if record is not None:
        message = "RCP found"
    elif low is not None and high is not None:
        message, record = "RCP Interpolation", checker._create_interp_rcp(gbs, low, high)[1]
    elif low is None and high is not None:
        message = "RCP not found but slower convergence on smaller batch size"
        record = checker._find_min_rcp("pruned_rcps")
    else:
        return f"Fail: {'Cannot find any RCPs' if low is None else f'Missing RCP, please submit RCP with BS = {gbs}'}"
    passed, factor = checker._eval_submission_record(record, epochs, "")
    if not passed and message.startswith("RCP not found"):
        message = f"Missing RCP, please submit RCP with BS = {gbs}"
    norm = f"; it normalises by {float(factor):.6g}" if passed and factor > 1 else ""
    return f"{'Pass' if passed else 'Fail'}: {message} (mlperf-logging's RCP checker, ruleset {ruleset}){norm}"


def compliance(raw: bytes, ruleset: str) -> tuple[bool, str]:
    """MLPerf's compliance checker on one log, as the summarizer runs it: (passed, its first complaint)."""
    checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=True, werror=False)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with tempfile.NamedTemporaryFile(prefix="tprimat-mlperf-", suffix=".txt") as log:
            log.write(raw)
            log.flush()
            valid = mlp_compliance.main(log.name, f"{USAGE}_{ruleset}/common.yaml", checker)[0]
    except Exception as exc:  # the checker's own failure (a rule's Python raising) is its verdict on this log
        return False, f"the checker stopped: {one_line(exc)}"
    finally:
        root.removeHandler(handler)
    complaint = next((m.strip() for m in records if m.strip() and "Running compliance" not in m
                      and "Compliance checks" not in m), "")
    return bool(valid), one_line(complaint.splitlines()[0] if complaint else "", 200)
