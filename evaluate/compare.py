"""Compare every result in a directory: ``compare.png``, ``loss_parity.png`` and ``compare.md``.

Loads each ``train_*.json`` of ``--results-dir`` (default: the config's
``OUTPUT_DIR``), skipping invalid or truncated files with a warning that names
them, groups results by model and by (platform, framework), aggregates repeated
runs (median and 95% interval), and writes the figure and the report next to the
results (or to ``--output-dir``).

Workloads that differ (any fairness key or fingerprint, see
:mod:`evaluate.fairness`) are refused with the list of differences and exit status
1, unless ``--allow-mismatch`` is given; the report's first line then says so.
Exit status: 0 written, 1 refused (unfair), 2 nothing to compare or bad usage.

CLI: ``python -m evaluate.compare [--results-dir DIR] [--price-per-gpu-hour amd=2.5 nvd=3.0]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evaluate.analysis import summarize_group
from evaluate.fairness import check_fairness
from evaluate.plots import comparison_figure, loss_parity_figure, save_figure
from evaluate.report import Comparison, console, markdown
from evaluate.results import find_result_files, load_results
from utils.atomic import atomic_write_text
from utils.configure import PLATFORMS, ConfigError, load_config

EXIT_OK, EXIT_UNFAIR, EXIT_USAGE = 0, 1, 2


def parse_prices(items: list[str] | None) -> dict[str, float]:
    """``["amd=2.5", "nvd=3"]`` -> ``{"amd": 2.5, "nvd": 3.0}``; errors name the bad item."""
    prices: dict[str, float] = {}
    for item in items or []:
        platform, sep, value = item.partition("=")
        platform = platform.strip().lower()
        if not sep or platform not in PLATFORMS:
            raise ValueError(f"--price-per-gpu-hour {item!r}: expected PLATFORM=DOLLARS with PLATFORM one of "
                             f"{', '.join(PLATFORMS)}, e.g. amd=2.5")
        try:
            price = float(value)
        except ValueError:
            raise ValueError(f"--price-per-gpu-hour {item!r}: {value!r} is not a number") from None
        if not price > 0:
            raise ValueError(f"--price-per-gpu-hour {item!r}: price must be greater than 0")
        prices[platform] = price
    return prices


def build_comparison(results_dir: Path, allow_mismatch: bool, prices: dict[str, float]) -> Comparison | None:
    """Load and summarize; None when there is no valid result at all (the caller explains)."""
    loaded = load_results(find_result_files(results_dir))
    for path, reason in loaded.skipped:
        print(f"warning: skipping {path}: {reason}", file=sys.stderr)
    if not loaded.results:
        return None
    by_model = {model: [summarize_group(g) for g in groups] for model, groups in loaded.groups().items()}
    return Comparison(by_model=by_model, fairness=check_fairness(loaded.results), skipped=loaded.skipped,
                      allow_mismatch=allow_mismatch, prices=prices)


def write_outputs(comparison: Comparison, output_dir: Path) -> list[Path]:
    """compare.png, loss_parity.png (only when a platform pair is comparable), compare.md; each atomically."""
    written = [save_figure(comparison_figure(comparison.by_model), output_dir / comparison.figure_name)]
    parities = comparison.all_parities()
    if comparison.parity_figure_name and any(p.reason is None for p in parities):
        written.append(save_figure(loss_parity_figure(parities), output_dir / comparison.parity_figure_name))
    written.append(atomic_write_text(output_dir / "compare.md", markdown(comparison)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.compare", description=__doc__.split("\n\n")[0],
                                     epilog="Exit status: 0 written, 1 workloads differ (refused), "
                                            "2 nothing to compare or bad usage.")
    parser.add_argument("--results-dir", type=Path, help="directory with train_*.json (default: OUTPUT_DIR)")
    parser.add_argument("--output-dir", type=Path, help="where compare.png/compare.md go (default: results dir)")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="compare even if workloads differ; the report's first line says so")
    parser.add_argument("--price-per-gpu-hour", nargs="+", metavar="PLATFORM=DOLLARS",
                        help="GPU-hour price per platform for the cost per 1T tokens, e.g. amd=2.5 nvd=3.0")
    args = parser.parse_args(argv)
    try:
        prices = parse_prices(args.price_per_gpu_hour)
    except ValueError as exc:
        parser.error(str(exc))
    results_dir = args.results_dir
    if results_dir is None:
        try:
            results_dir = load_config().output_dir
        except ConfigError as exc:
            print(f"config error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if not results_dir.is_dir():
        print(f"error: results directory {results_dir} does not exist", file=sys.stderr)
        return EXIT_USAGE
    comparison = build_comparison(results_dir, args.allow_mismatch, prices)
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
    written = write_outputs(comparison, args.output_dir or results_dir)  # files first: a closed pipe loses no output
    print(console(comparison))
    print("\nwrote: " + ", ".join(str(p) for p in written))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
