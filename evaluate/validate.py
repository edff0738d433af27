"""Validate result files: schema, sanity of the numbers, and fairness across them.

The checks are evaluate/analysis/validation.py's, the text evaluate/render/validation.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from evaluate.analysis.results import load_results
from evaluate.analysis.validation import DEFAULT_MIN_STEPS, collect_paths, validate_loaded
from evaluate.render.validation import render_text
from utils.config.cli import exits_on_config_error, number_argument
from utils.config.load import load_config
from utils.io.sanitise import safe_text

_count = number_argument(int, "a whole number", lambda value: value >= 0, "{value} is negative")  # argparse type


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.validate", description=__doc__.split("\n\n")[0],
                                     epilog="Exit status: 0 valid, 1 a check failed, 2 nothing to validate.")
    parser.add_argument("paths", type=Path, nargs="*", help="result files or directories (default: OUTPUT_DIR)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--min-steps", type=_count, default=DEFAULT_MIN_STEPS,
                        help=f"fewest measured steps a result may have (default {DEFAULT_MIN_STEPS})")
    args = parser.parse_args(argv)
    inputs = args.paths or [load_config().output_dir]
    missing = [p for p in inputs if not os.path.lexists(p)]  # a link (even a loop) is reported by the loader
    if missing:
        print(f"error: no such file or directory: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    paths = collect_paths(inputs)
    if not paths:
        print(f"error: no train_*.json result files in {', '.join(map(str, inputs))}", file=sys.stderr)
        return 2
    report = validate_loaded(load_results(paths), args.min_steps)
    print(json.dumps(report.as_dict(), indent=2) if args.json else safe_text(render_text(report)))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
