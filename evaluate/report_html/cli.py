"""``python -m evaluate.report_html``: write ``report.html``, the comparison as one page a person opens.

Reads every ``train_*.json`` of ``--results-dir`` (default: the config's ``OUTPUT_DIR``) as ``evaluate.compare``
does (invalid files named and skipped), the results database (``--db``, else ``HISTORY_DB``; off or missing: the
page says so), and the gate's report (``--gate-report``, default ``gate.json`` beside the results). Workloads that
differ are not refused: the page's first line says NOT FAIR and why. Written atomically to
``--output`` (default ``report.html`` in the results folder, never outside it).

Exit status: 0 written; 2 nothing to show, bad usage or the page cannot be written (one line); 128 + n when
stopped by signal n (nothing half-written).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from evaluate.analysis.comparison import build_comparison
from evaluate.compare import add_comparison_options, comparison_options
from evaluate.report_html.database import read_history
from evaluate.report_html.facts import gather
from evaluate.report_html.page import render
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.io.atomic import atomic_write_text
from utils.io.output_path import OutputPathError, output_file
from utils.result.names import mark_output_dir

PAGE = "report.html"
PROG = "python -m evaluate.report_html"


class Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, help="directory with train_*.json (default: OUTPUT_DIR)")
    parser.add_argument("--output", type=Path, metavar="FILE",
                        help=f"the page (default: RESULTS_DIR/{PAGE}); links to results are relative to it")
    parser.add_argument("--db", help="the results database: a path, a URL or off (default: HISTORY_DB)")
    parser.add_argument("--gate-report", type=Path, metavar="FILE",
                        help="evaluate.gate's --report JSON (default: RESULTS_DIR/gate.json when present)")
    add_comparison_options(parser)
    return parser


def write_page(results_dir: Path, output: Path | None, db: str | None, gate_report: Path | None,
               prices: dict[str, float], band: float) -> Path | None:
    """Build and write the page; None when there is no valid result (the caller says so)."""
    comparison = build_comparison(results_dir, True, prices, band)
    if comparison is None:
        return None
    if output is None:
        output = output_file(results_dir, PAGE)
        mark_output_dir(results_dir)
    text = render(gather(comparison, results_dir, read_history(db, comparison), gate_report, output))
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output, text)
    return output


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prices = comparison_options(parser, args)
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        results_dir = args.results_dir if args.results_dir is not None else load_config().output_dir
        if not results_dir.is_dir():
            print(f"report_html: results directory {results_dir} does not exist", file=sys.stderr)
            return 2
        written = write_page(results_dir, args.output, args.db, args.gate_report, prices, args.convergence_band)
    except Stopped as stop:
        print(f"report_html: stopped by {signal.Signals(stop.signum).name}; no page written", file=sys.stderr)
        return 128 + stop.signum
    except (OSError, OutputPathError) as exc:
        where = getattr(exc, "filename", None)
        print(f"report_html: cannot write the page{f' {where}' if where else ''}: "
              f"{getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if written is None:
        print(f"report_html: no valid train_*.json results in {results_dir}: nothing to show", file=sys.stderr)
        return 2
    print(f"report: {written}")
    return 0
