"""``python -m evaluate.gate``: a regression gate for CI, candidates against a baseline from the history database.

Exit 0: every candidate passes; 1: a regression (each failing line names the metric, both values and the
threshold); 2: bad input (an unusable database, an unreadable or forged candidate file, a baseline selector
that matches nothing, only unusable runs or several workloads), one line and nothing judged.

Candidates are result files, folders or ``output.zip`` archives (``--candidate``, read by the same strict
reader as ``evaluate.compare``), or stored runs (``--candidate-runs``). The baseline (``--baseline``) is
``last-ok`` (the default: for each candidate, the last ok run of its workload, platform and framework on its
device), run ids (``42`` or ``42,43,44``) or a tag (``tag:NAME``). The rules (throughput against
max(5%, the baseline's run-to-run spread), loss by Megatron-Bridge's convergence rules, cross-vendor
equivalence against measured noise) are the gate rules of ``train/settings/rules.json``, each with its
source in docs/CONFORMANCE.md's rules table; ``evaluate/history/gate.py`` applies them.

CI use::

    ./shell/train.sh                                  # adds every result to HISTORY_DB after its job
    python -m evaluate.gate --candidate output/ --baseline tag:accepted
    python -m evaluate.history tag 42 accepted        # promote a run to the baseline
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluate.history.cli import lock_seconds
from evaluate.history.gate import DEFAULT_FLOOR, GateSettings, Verdict, judge, usable_baseline
from evaluate.history.gate_report import WORDS, CandidateReport, CheckReport, GateReport
from evaluate.history.ingest import collect
from evaluate.history.noise import tolerance
from evaluate.history.query import LAST_OK, RunView, last_ok, resolve
from evaluate.history.store import open_database, safe_output
from evaluate.history.target import HistoryError, configured_db
from utils.config.rules import ConfigError
from utils.io.atomic import atomic_write_text
from utils.io.sanitise import MESSAGE_CHARS, one_line


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text}: a fraction in [0, 1), e.g. 0.05 for 5%")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m evaluate.gate", description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--candidate", type=Path, nargs="+", metavar="PATH",
                      help="candidate result files, output folders or output.zip archives")
    what.add_argument("--candidate-runs", metavar="SELECTOR", help="stored runs as candidates: 42, 42,43 or tag:NAME")
    parser.add_argument("--baseline", default=LAST_OK,
                        help=f"{LAST_OK} (default), run ids (42 or 42,43,44) or a tag (tag:NAME)")
    parser.add_argument("--db", help="the history database (default: HISTORY_DB from config.env)")
    parser.add_argument("--lock-timeout", type=lock_seconds, default=30.0, metavar="S",
                        help="seconds to wait for a lock")
    parser.add_argument("--throughput-threshold", type=_fraction, default=DEFAULT_FLOOR, metavar="F",
                        help=f"slowest allowed change of tokens/s/GPU before the spread (default {DEFAULT_FLOOR})")
    parser.add_argument("--spread", choices=("range", "off"), default="range",
                        help="range (default): the threshold is max(F, (max-min)/median of the baseline runs); "
                             "off: F alone")
    parser.add_argument("--no-loss", action="store_true", help="skip the loss-curve checks")
    step, tail = tolerance()
    parser.add_argument("--cross-vendor", action="store_true",
                        help="loss equivalence of a run on one platform against a baseline on another "
                             "(same workload, samples digest and initialisation); no throughput check")
    parser.add_argument("--step-tolerance", type=_fraction, default=step, metavar="F",
                        help=f"cross-vendor: largest per-step loss gap (default {step}: evaluate/history/noise.py)")
    parser.add_argument("--tail-tolerance", type=_fraction, default=tail, metavar="F",
                        help=f"cross-vendor: gap of the mean loss over the last 10 steps (default {tail})")
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="also write the verdicts as JSON (written atomically; a report page reads it)")
    return parser


def report(verdicts: list[Verdict] | None, code: int, error: str | None = None) -> GateReport:
    """The verdicts as data: per candidate its baseline runs and every check (pass, fail or skip, and the line)."""
    return GateReport(verdict={0: "pass", 1: "regression"}.get(code, "bad input"), exit_code=code, error=error,
                      candidates=[CandidateReport(
                          candidate=v.candidate.label, run_id=v.candidate.id,
                          baseline_run_ids=[b.id for b in v.baseline],
                          checks=[CheckReport(metric=c.metric, result=WORDS[c.passed], line=c.line) for c in v.checks])
                          for v in verdicts or []])


def _write_report(path: Path | None, data: GateReport) -> None:
    if path is not None:
        atomic_write_text(path, data.json_text())


def _candidates(args: argparse.Namespace, conn) -> list[RunView]:  # type: ignore[no-untyped-def]
    """The candidates; refused when one is unreadable or cannot be true (``utils/result/admit.py``)."""
    if args.candidate_runs:
        views, refused = resolve(conn, args.candidate_runs), []
    else:
        collected = collect(args.candidate)
        views, refused = [RunView.of_record(r) for r in collected.records], collected.refused
    refused = refused + [f"{v.label}: {v.run['error']}" for v in views if v.run["status"] == "refused"]
    if refused:
        raise HistoryError(f"candidate refused: {one_line(refused[0], 400)}"
                           + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""))
    if not views:
        raise HistoryError("no candidate result found")
    return views


def run_gate(args: argparse.Namespace) -> list[Verdict]:
    settings = GateSettings(args.throughput_threshold, args.spread, not args.no_loss, args.cross_vendor,
                            args.step_tolerance, args.tail_tolerance)
    db_text = args.db if args.db is not None else configured_db()
    with open_database(db_text, lock_timeout=args.lock_timeout) as db, db.read() as conn:
        candidates = _candidates(args, conn)
        verdicts = []
        explicit = None if args.baseline == LAST_OK else usable_baseline(resolve(conn, args.baseline), args.baseline)
        for candidate in candidates:
            if explicit is not None:
                baseline = [v for v in explicit if v.run["content_hash"] != candidate.run["content_hash"]]
                if not baseline:
                    raise HistoryError(f"the baseline {one_line(args.baseline, 60)!r} is the candidate itself")
            else:
                if args.cross_vendor:
                    raise HistoryError("--cross-vendor needs a named baseline (run ids or tag:NAME) on the other "
                                       "platform")
                found = last_ok(conn, candidate)
                if found is None:
                    raise HistoryError(f"no ok run of {candidate.label}'s workload on "
                                       f"{one_line(candidate.run['device_name'], 60)} to compare with: add one, "
                                       "or name a baseline (--baseline 42 or tag:NAME)")
                baseline = [found]
            verdicts.append(judge(candidate, baseline, settings))
    return verdicts


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    safe_output()
    try:
        verdicts = run_gate(args)
    except (HistoryError, ConfigError) as exc:
        line = one_line(f"gate: {exc}" if isinstance(exc, HistoryError) else f"config error: {exc}", MESSAGE_CHARS)
        print(line, file=sys.stderr)
        _write_report(args.report, report(None, 2, line))
        return 2
    failed = 0
    for verdict in verdicts:
        ids = ", ".join(f"#{v.id}" for v in verdict.baseline[:10]) + (" ..." if len(verdict.baseline) > 10 else "")
        print(f"gate: {verdict.candidate.label} against baseline {ids} ({len(verdict.baseline)} run(s))")
        for check in verdict.checks:
            print(f"  {check.shown}")
        failed += bool(verdict.failed)
    code = 1 if failed else 0
    _write_report(args.report, report(verdicts, code))
    if failed:
        print(f"gate: REGRESSION in {failed} of {len(verdicts)} candidate(s)")
        return 1
    print(f"gate: PASS ({len(verdicts)} candidate(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
