"""Figures of the MLPerf import (issue 48): its time over a whole round, the page over it, the reader against
mlperf-logging's parser, and the scores against MLPerf's summarizer.

Limits on 2 cores: importing v5.1's 390 Llama 3.1 8B runs <= 5 s, the page over them <= 10 s. ``TREE`` is a results
tree (a clone of mlcommons/training_results_v5.1); ``--quick``: the carried sample::

    .venv/bin/python -m bench.mlperf import TREE     # also: page TREE, parse TREE, equality TREE SUMMARY_CSV
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench.load import measure

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "fixtures" / "mlperf" / "v51_sample.tar.xz"
LIMITS = {"import": (5.0, None), "page": (10.0, None)}


def _import(tree: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "evaluate.mlperf", "import", str(tree), "--round", "5.1", "--output-dir", str(out)]


def parse(tree: Path) -> dict[str, object]:
    """Both readers over every log in this process: their seconds, and whether their events agree."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    from evaluate.mlperf.reader import read_log

    logs = sorted(tree.rglob("result_*.txt"))
    raws = [p.read_bytes() for p in logs]
    start = time.perf_counter()
    ours = [read_log(raw) for raw in raws]
    fast = time.perf_counter() - start
    start = time.perf_counter()
    theirs = [parse_file(str(p), "5.1.0") for p in logs]
    slow = time.perf_counter() - start
    same = sum(len(o.events) + len(o.lazy) == len(t[0]) and o.failed == t[1] and
               [(e.key, e.timestamp, e.value) for e in o.events] ==
               [(line.key, line.timestamp, line.value["value"]) for line in t[0] if line.key != "tracked_stats"]
               for o, t in zip(ours, theirs, strict=True))
    return {"logs": len(logs), "records": sum(len(t[0]) for t in theirs), "reader_s": round(fast, 2),
            "mlp_parser_s": round(slow, 2), "logs_with_the_same_events": same}


def equality(tree: Path, summary: Path, out: Path) -> dict[str, object]:
    """tprimat's score of every system against the summarizer's, to 1e-9 relative."""
    from tests.helpers.mlperf import imported_scores, summarizer_scores

    measure("import", 0, _import(tree, out), LIMITS["import"])
    theirs, ours = summarizer_scores(summary), imported_scores(out)
    worst = max((abs(ours[k] - v) / v for k, v in theirs.items() if k in ours), default=float("nan"))
    equal = sum(1 for k, v in theirs.items() if k in ours and abs(ours[k] - v) <= 1e-9 * v)
    return {"systems_summarizer": len(theirs), "systems_tprimat": len(ours), "equal_to_1e-9": equal,
            "max_relative_difference": worst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mlperf", description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=("import", "page", "parse", "equality"))
    parser.add_argument("tree", type=Path, nargs="?", help="a results tree (default with --quick: the sample)")
    parser.add_argument("summary", type=Path, nargs="?", help="equality: the summarizer's detailed CSV of TREE")
    parser.add_argument("--quick", action="store_true", help="the carried sample instead of TREE")
    args = parser.parse_args(argv)
    tree = SAMPLE if args.quick or args.tree is None else args.tree
    with tempfile.TemporaryDirectory(prefix="tprimat-mlperf-bench-") as tmp:
        out = Path(tmp) / "imported"
        if args.which == "parse":
            print(json.dumps(parse(tree)))
            return 0
        if args.which == "equality":
            print(json.dumps(equality(tree, args.summary, out)))
            return 0
        figure = measure("import", 0, _import(tree, out), LIMITS["import"])
        if args.which == "page":
            figure = measure("page", 0, [sys.executable, "-m", "evaluate.report_html", "--results-dir", str(out),
                                         "--output", str(Path(tmp) / "page" / "report.html"), "--db", "off"],
                             LIMITS["page"])
        figure.size = len(list(out.glob("train_*.json")))
        print(json.dumps({**asdict(figure), "within_limits": figure.within}))
        return 0 if figure.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
