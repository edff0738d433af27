"""``python -m evaluate.gpu_check``: the GPU self-check's table and verdict, written as ``gpu_check.md`` and ``.json``.

``shell/gpu_check.sh`` runs the prescreen and a short job per framework, then this. Exit 0 ready, 1 degraded or
broken, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from evaluate.gpu_check.check import build_check
from evaluate.gpu_check.model import GpuCheck
from evaluate.gpu_check.render import render_console, render_markdown
from train.launch.jobs import frameworks_for
from utils.files.generated import GPU_CHECK_DIR
from utils.io.atomic import atomic_write_text
from utils.io.sanitise import safe_markdown, safe_text
from utils.spec.registry import model_names, platform_names

OUTPUT_STEM = GPU_CHECK_DIR  # gpu_check.md and .json beside the check's folder (utils/files/generated.py)


def write_check(check: GpuCheck, out_dir: Path) -> tuple[Path, Path]:
    md, js = out_dir / f"{OUTPUT_STEM}.md", out_dir / f"{OUTPUT_STEM}.json"
    atomic_write_text(js, check.model_dump_json(indent=2) + "\n")
    atomic_write_text(md, safe_markdown(render_markdown(check)))
    return md, js


def main(argv: list[str] | None = None, say: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluate.gpu_check",
        description="The GPU check's table from its results and prescreen: per framework of the platform, status, "
        "tokens/s, MFU against the datasheet and the measured GEMM peak, peak memory and its estimate, energy, the "
        "first two losses, tprimat's step time against the framework's own; then a one-line verdict.",
        epilog="Exit 0 ready, 1 degraded or broken, 2 bad input or the outputs cannot be written.")
    parser.add_argument("--results-dir", type=Path, required=True, help="the check's train_*.json results")
    parser.add_argument("--platform", required=True, choices=platform_names())
    parser.add_argument("--model", default="llama", choices=model_names())
    parser.add_argument("--prescreen", type=Path, help="the prescreen record (python -m utils.machine.prescreen)")
    parser.add_argument("--out-dir", type=Path, required=True, help=f"where {OUTPUT_STEM}.md and .json go")
    parser.add_argument("--frameworks", nargs="+", metavar="NAME", default=["all"],
                        help="the frameworks the check ran, as FRAMEWORK names them (all, or names; prim on nvd is "
                        "nemo, nemo on amd is prim; default: all)")
    args = parser.parse_args(argv)
    try:
        frameworks, notes = frameworks_for(args.platform, args.frameworks)
    except ValueError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        say(f"gpu_check: {note}")
    if not args.results_dir.is_dir():
        print(f"gpu_check: results directory {args.results_dir} does not exist", file=sys.stderr)
        return 2
    check = build_check(args.results_dir, args.platform, args.model, args.prescreen, frameworks)
    try:
        md, js = write_check(check, args.out_dir)
    except OSError as exc:
        print(f"gpu_check: cannot write into {args.out_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    say(safe_text(render_console(check)))
    say(f"written {md} and {js}")
    return 0 if check.verdict == "ready" else 1


if __name__ == "__main__":
    sys.exit(main())
