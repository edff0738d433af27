"""``python -m evaluate.mlperf import PATH...``: MLPerf Training's published runs as tprimat results.

Writes one result per run into ``--output-dir`` and prints one line per system (GPUs, runs, counted runs, MLPerf's
score); every run or file not imported is one line saying why. Exit 1 when no run was imported, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluate.mlperf import score as scoring
from evaluate.mlperf.reader import read_log
from evaluate.mlperf.result import BENCHMARKS, ImportRefused, build, describe
from evaluate.mlperf.run import RunFacts, run_facts
from evaluate.mlperf.sources import Found, RunRef, find
from utils.io.atomic import atomic_write_text
from utils.io.json_input import JsonInputError, parse_json
from utils.io.output_path import OutputPathError, output_file, safe_label
from utils.io.sanitise import one_line
from utils.result.admit import refusals
from utils.result.mllog import rcp_point
from utils.result.names import ORIGIN, mark_output_dir, result_name

DEFAULT_OUTPUT = Path("output") / "mlperf"


@dataclass
class Read:
    """One run read: where it is, its bytes, its facts and its system's description (None: a tprimat MLLOG)."""

    run: RunRef
    raw: bytes
    digest: str
    facts: RunFacts
    system: dict[str, Any] | None
    counted: scoring.Counted | None = None
    check: str | None = None


def _system(found: Found, run: RunRef, cache: dict[tuple[str, str], Any]) -> dict[str, Any] | None:
    """The run's system description (read once), None for a log outside a tree; ImportRefused when absent."""
    if run.submitter is None or run.system is None:
        return None
    key = (run.submitter, run.system)
    if key not in cache:
        ref = found.systems.get(key)
        try:
            if ref is None:
                raise ImportRefused(f"no system description {run.submitter}/systems/{run.system}.json beside it")
            cache[key] = describe(parse_json(ref.read().decode("utf-8", "replace"), ref.shown, 8), ref.shown)
        except (ImportRefused, JsonInputError, OSError, ValueError) as exc:
            cache[key] = ImportRefused(one_line(exc, 300))
    if isinstance(cache[key], ImportRefused):
        raise cache[key]
    return cache[key]


def _counted(read: Read, check: bool, ruleset: str | None) -> scoring.Counted:
    """Whether the summarizer counts the run (``score.py``), with the checker's verdict when asked."""
    facts = read.facts
    minutes = (facts.stop_ms - facts.start_ms) / 60000 if facts.stop_ms is not None and facts.start_ms else None
    bench = BENCHMARKS[facts.benchmark or ""]
    reached = bool(facts.evaluations) and facts.evaluations[-1].loss is not None and \
        facts.evaluations[-1].loss <= (facts.number("target_accuracy") or bench.target)
    why = ("its log has lines that do not parse (the summarizer drops it)" if facts.failed_lines
           else "no run_stop" if facts.stop_ms is None else "")
    if not why and check and ruleset:
        passed, complaint = scoring.compliance(read.raw, ruleset)
        read.check = "SUCCESS" if passed else "FAILED"
        why = "" if passed else f"MLPerf's compliance checker: FAILED ({complaint or 'no message'})"
    elif not why and facts.stop_status != "success":
        why = f"run_stop status {facts.stop_status}: it did not converge"
    elif not why and not reached:
        why = "its last evaluation is above the target"
    return scoring.Counted(minutes, not why, why)


def read_runs(found: Found, benchmark: str, refused: list[str]) -> tuple[list[Read], dict[str, int]]:
    """Every run of ``benchmark`` the paths hold; the others counted by benchmark, the unusable refused."""
    reads: list[Read] = []
    others: dict[str, int] = defaultdict(int)
    seen: dict[str, str] = {}
    systems: dict[tuple[str, str], Any] = {}
    for run in found.runs:
        if run.benchmark is not None and run.benchmark != benchmark:
            others[run.benchmark] += 1
            continue
        try:
            raw = run.ref.read()
            digest = hashlib.sha256(raw).hexdigest()
            if digest in seen:
                raise ImportRefused(f"a duplicated run: the same log as {seen[digest]}")
            seen[digest] = run.place
            facts = run_facts(read_log(raw))
            if facts.benchmark != benchmark:
                raise ImportRefused(f"logs benchmark {one_line(facts.benchmark, 40)}, not {benchmark}"
                                    + (" (in its folder)" if run.benchmark else ""))
            reads.append(Read(run, raw, digest, facts, _system(found, run, systems)))
        except (ImportRefused, OSError, ValueError) as exc:
            refused.append(f"{run.ref.shown}: not imported: {one_line(exc, 300)}")
    return reads, dict(others)


def import_runs(args: argparse.Namespace) -> int:
    found = find(args.paths)
    refused = list(found.refused)
    rounds = sorted(found.rounds)
    round_ = args.round or (rounds[0] if len(rounds) == 1 else None)
    if args.round is None and len(rounds) > 1:
        print(f"mlperf: the paths hold rounds {', '.join(rounds)}: import one at a time, or say --round",
              file=sys.stderr)
        return 2
    ruleset = f"{round_}.0" if round_ else None
    if args.check and ruleset not in scoring.rule_choices():
        print(f"mlperf: --check needs the round (--round, e.g. 5.1) of a ruleset mlperf-logging knows; got "
              f"{one_line(round_, 20)}", file=sys.stderr)
        return 2
    reads, others = read_runs(found, args.benchmark, refused)
    by_system: dict[tuple[str, str], list[Read]] = defaultdict(list)
    for read in reads:
        read.counted = _counted(read, args.check, ruleset)
        by_system[(read.run.submitter or "", read.run.system or read.run.place)].append(read)
    written, usable, lines, names = 0, 0, [], set()
    try:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        mark_output_dir(args.output_dir)  # tprimat's output folder: shell/wrap.sh packs it, purge knows its names
    except OSError as exc:
        print(f"mlperf: --output-dir {one_line(args.output_dir, 300)}: {one_line(exc.strerror or exc)}",
              file=sys.stderr)
        return 1
    for (submitter, system), group in sorted(by_system.items()):
        published = group[0].system is not None
        scaling, why = scoring.scaling_factor(
            (lambda ref: ref.read() if ref else None)(found.scaling.get((submitter, system, args.benchmark))),
            f"{submitter}/results/{system}/{args.benchmark}/scaling.json")
        if why:
            refused.append(why)
        result_score = scoring.system_score(args.benchmark, [r.counted for r in group], scaling) if published \
            else None
        if result_score is not None:
            gbs = group[0].facts.count("global_batch_size")
            result_score.rcp = scoring.rcp_verdict(args.benchmark, ruleset, gbs, [r.facts.converged_samples
                                                                                  for r in group]) \
                if args.check and ruleset else _rcp_note(gbs, ruleset)
        for read in group:
            one, ok = _write(read, round_, result_score, args.output_dir, refused, names)
            written, usable = written + one, usable + ok
            if read.counted is not None and not read.counted.counted:
                refused.append(f"{read.run.ref.shown}: not counted in MLPerf's score: {read.counted.reason}")
        lines.append(_line(submitter, system, group, result_score))
    for benchmark, count in sorted(others.items()):
        print(f"mlperf: {count} run(s) of benchmark {one_line(benchmark, 40)} left out (--benchmark "
              f"{args.benchmark}: each benchmark is imported and compared on its own)", file=sys.stderr)
    for line in refused:
        print(f"mlperf: {line}", file=sys.stderr)
    print("\n".join(lines))
    print(f"mlperf: {written} result(s) written to {one_line(args.output_dir, 300)} ({usable} ok); {len(refused)} "
          "file(s) refused or not counted" + ("" if round_ else "; round not known (say --round)"))
    return 0 if usable else 1


def _rcp_note(gbs: int | None, ruleset: str | None) -> str:
    if not ruleset or gbs is None:
        return "not checked"
    point = rcp_point(gbs, ruleset)
    return f"{point.kind}: {point.note} (the RCP checker runs with --check)"


def _write(read: Read, round_: str | None, score: scoring.SystemScore | None, folder: Path,
           refused: list[str], written: set[str]) -> tuple[int, int]:
    """Write one run's result: (1, 1 when its status is ok), or (0, 0) and its refusal."""
    try:
        result = build(read.run, read.digest, read.facts, read.system, round_, read.counted, score, read.check)
        problems = refusals(result)  # the gate every reader of results applies (utils/result/admit.py)
        if problems:
            raise ImportRefused(f"an impossible figure: {problems[0]}")
        origin = safe_label(f"{read.run.submitter}.{read.run.system}", "run").replace("_", "-").strip("-.")[:70]
        name = result_name(result.platform, result.framework, result.model, result.run_index, "mlperf",
                           origin if ORIGIN.fullmatch(origin) else None)
        path = output_file(folder, name)
        if name in written:
            raise ImportRefused(f"{name} is written already by another run of this import (two systems whose names "
                                "differ only in punctuation)")
        written.add(name)
        atomic_write_text(path, result.model_dump_json(indent=2) + "\n")  # validated strictly by build()
        return 1, int(result.status == "ok")
    except (ImportRefused, OutputPathError, OSError, ValueError) as exc:
        refused.append(f"{read.run.ref.shown}: not imported: {one_line(exc, 300)}")
        return 0, 0


def _line(submitter: str, system: str, group: list[Read], score: scoring.SystemScore | None) -> str:
    counted = sum(1 for r in group if r.counted and r.counted.counted)
    head = f"{one_line(submitter, 40)}/{one_line(system, 60)}" if submitter else one_line(system, 100)
    gpus = group[0].system["gpus"] if group[0].system else "?"
    if score is None:
        return f"{head}: {len(group)} run(s) (tprimat's own MLLOG)"
    shown = f"{score.score_min:.4f} min" if score.score_min is not None else f"no score ({score.reason})"
    return f"{head}: {gpus} GPUs, {len(group)} runs, {counted} counted, MLPerf score {shown}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.mlperf", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("import", help="read MLPerf Training results (trees, archives, MLLOG files) as tprimat results")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="a clone of a results repository, a submitter's, system's or benchmark's folder, an archive "
                        "(zip, tar, tar.gz, tar.xz) of one, or an MLLOG file")
    p.add_argument("--benchmark", default="llama31_8b", choices=sorted(BENCHMARKS),
                   help="the benchmark to import (default llama31_8b, which joins tprimat's llama under "
                        "PROFILE=mlperf)")
    p.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT,
                   help=f"where results go (default {DEFAULT_OUTPUT})")
    p.add_argument("--round", help="the MLPerf round, e.g. 5.1 (default: from a training_results_v<round> path)")
    p.add_argument("--check", action="store_true",
                   help="run MLPerf's compliance checker on every log and the RCP checker on every system (minutes)")
    args = parser.parse_args(argv)
    return import_runs(args)
