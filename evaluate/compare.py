"""Compare every result in a directory: ``compare.png``, ``loss_parity.png``, ``compare.md`` and per platform
``compare_<platform>_frameworks.png`` (the frameworks of one platform side by side, evaluate/render/frameworks.py).

The comparison is evaluate/analysis/comparison.py's, its files evaluate/render/outputs.py's (inside
``--output-dir``, default the results folder). Workloads that differ (:mod:`evaluate.analysis.fairness`) are
refused with the differences unless ``--allow-mismatch``, and then the report's first line says so. Exit status: 0
written, 1 refused (unfair, and nothing else), 2 nothing to compare, bad usage or an output that cannot be written.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from evaluate.analysis.comparison import build_comparison
from evaluate.analysis.convergence import DEFAULT_BAND
from evaluate.render.console import console
from evaluate.render.frameworks import console_all
from evaluate.render.outputs import OutputError, write_outputs
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.io.sanitise import safe_text
from utils.spec.registry import platform_names

EXIT_OK, EXIT_UNFAIR, EXIT_USAGE = 0, 1, 2
EXIT_WRITE = EXIT_USAGE  # the outputs cannot be written: never the "unfair" code


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """``["amd=2.5", "nvd=3"]`` -> ``{"amd": 2.5, "nvd": 3.0}``; errors name the bad item.

    A price is a finite number of dollars above zero: ``inf``, ``nan``, zero and negative
    prices would print an infinite, undefined or free cost per 1T tokens.
    """
    platforms = platform_names()
    prices: dict[str, float] = {}
    for item in items or []:
        platform, sep, value = item.partition("=")
        platform = platform.strip().lower()
        if not sep or platform not in platforms:
            raise ValueError(f"--price-per-gpu-hour {item!r}: expected PLATFORM=DOLLARS with PLATFORM one of "
                             f"{', '.join(platforms)}, e.g. amd=2.5")
        try:
            price = float(value)
        except ValueError:
            raise ValueError(f"--price-per-gpu-hour {item!r}: {value.strip()!r} is not a number") from None
        if not math.isfinite(price) or price <= 0:
            raise ValueError(f"--price-per-gpu-hour {item!r}: the price must be a finite number of dollars "
                             "greater than 0")
        if platform in prices:
            raise ValueError(f"--price-per-gpu-hour {item!r}: {platform} is given twice")
        prices[platform] = price
    return prices


def add_comparison_options(parser: argparse.ArgumentParser) -> None:
    """``--price-per-gpu-hour`` and ``--convergence-band``: the comparison's options, also the page's
    (evaluate/report_html/cli.py)."""
    parser.add_argument("--price-per-gpu-hour", nargs="+", metavar="PLATFORM=DOLLARS",
                        help="GPU-hour price per platform for the cost per 1T tokens, e.g. amd=2.5 nvd=3.0")
    parser.add_argument("--convergence-band", type=float, default=DEFAULT_BAND, metavar="FRACTION",
                        help=f"largest relative gap of the final mean losses still fair (default {DEFAULT_BAND}, "
                             "i.e. 5%%; evaluate/analysis/convergence.py)")


def comparison_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, float]:
    """The parsed prices; a bad price or band is the parser's one-line error (exit 2)."""
    if not (math.isfinite(args.convergence_band) and 0 < args.convergence_band < 1):
        parser.error(f"--convergence-band {args.convergence_band}: a fraction between 0 and 1, e.g. 0.05")
    try:
        return parse_prices(args.price_per_gpu_hour)
    except ValueError as exc:
        parser.error(str(exc))


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.compare", description=__doc__.split("\n\n")[0],
                                     epilog="Exit status: 0 written, 1 workloads differ (refused), "
                                            "2 nothing to compare, bad usage, or the outputs cannot be written.")
    parser.add_argument("--results-dir", type=Path, help="directory with train_*.json (default: OUTPUT_DIR)")
    parser.add_argument("--output-dir", type=Path, help="where compare.png/compare.md go (default: results dir)")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="compare even if workloads differ; the report's first line says so")
    add_comparison_options(parser)
    args = parser.parse_args(argv)
    prices = comparison_options(parser, args)
    results_dir = args.results_dir
    if results_dir is None:
        results_dir = load_config().output_dir
    if not results_dir.is_dir():
        print(f"error: results directory {results_dir} does not exist", file=sys.stderr)
        return EXIT_USAGE
    comparison = build_comparison(results_dir, args.allow_mismatch, prices, args.convergence_band)
    if comparison is None:
        print(f"error: no valid train_*.json results in {results_dir}: nothing to compare "
              "(run a training job first, e.g. ./train/train_cpu_tran_llama.sh)", file=sys.stderr)
        return EXIT_USAGE
    if not comparison.fairness.fair and not args.allow_mismatch:
        print("error: refusing to compare different workloads:", file=sys.stderr)
        for difference in comparison.fairness.differences:
            print(f"  - {difference.describe()}", file=sys.stderr)
        print("fix the configs so the runs match, or pass --allow-mismatch to compare anyway "
              "(the report will say so in its first line)", file=sys.stderr)
        return EXIT_UNFAIR
    try:
        written = write_outputs(comparison, args.output_dir or results_dir)  # files first: a closed pipe loses none
    except OutputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_WRITE
    print(safe_text(console(comparison)))
    print(safe_text("\n" + console_all(comparison.by_model)))
    print("\nwrote: " + ", ".join(str(p) for p in written))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
