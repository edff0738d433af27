"""Log-analysis mode: Megatron-LM, Primus and NeMo logs or TensorBoard events -> tprimat results, no GPU.

``PATH`` is a log or event file (one result) or a folder (``--output-dir``: one result per run). A tprimat launch's
log is measured against config.env; any other gives its own workload.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from evaluate.render.tables import console_table
from train.logs.analyse import AnalysisOptions, analyse_files, analyse_run
from train.logs.discover import discover
from train.logs.scan import LOG_FRAMEWORKS, LogInputError
from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.io.sanitise import one_line
from utils.result.file import ResultError, result_path, write_result
from utils.schema.model import Result
from utils.spec.registry import FRAMEWORKS, PLATFORMS, model_names

LOG_PLATFORMS = tuple(p for p in PLATFORMS if any(p in FRAMEWORKS[key].platforms for key in LOG_FRAMEWORKS))
BIG_FILE_BYTES = 64 * 1024 * 1024
MESSAGE_CHARS = 2000
HEADERS = ("found", "files", "format", "job", "steps", "status", "result or reason")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evaluate.extract",
        description="Turn Megatron-LM, Primus or NeMo training logs and TensorBoard event files into unified "
        "tprimat results (log-analysis mode: no GPU needed). A log of a tprimat launch is measured against "
        "config.env; any other log gives its own workload (what it does not state is null, with the reason). "
        "Exit 0 when every result is ok, 1 when one is incomplete or failed or a log in a folder could not be "
        "used, 2 on bad input.",
    )
    parser.add_argument("path", type=Path, help="a log, a TensorBoard event file, or a folder to search")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--from-log", action="store_true",
                      help="take the workload from the log even when it is a tprimat launch")
    mode.add_argument("--from-config", action="store_true",
                      help="measure against config.env even without tprimat's launch header (an older tprimat log)")
    parser.add_argument("--platform", choices=LOG_PLATFORMS, help="where the run ran (default: from the log)")
    parser.add_argument("--framework", choices=LOG_FRAMEWORKS, help="what wrote the log (default: from the log)")
    parser.add_argument("--model", choices=model_names(),
                        help="the model (default: recognised from the log's arguments; required when it has none)")
    parser.add_argument("--model-size", choices=("full", "tiny"), default="full",
                        help="shape for --model when the log states no dimensions (default: full)")
    parser.add_argument("--gpu-name", help="device the run used, e.g. 'AMD Instinct MI300X', for peak FLOP/s and MFU")
    parser.add_argument("--skip-steps", type=int, default=None, metavar="N",
                        help="warm-up iterations from the first logged one (default: max(2, 10%% of the entries); "
                        "tprimat launches: MEASURE_SKIP_STEPS)")
    parser.add_argument("--returncode", type=int, default=None,
                        help="the run's exit code, if known (unknown: judged from the log alone)")
    parser.add_argument("--run-index", type=int, default=None, help="repeat number k, recorded in the result")
    parser.add_argument("--output", type=Path, help="write the result of a file here (atomically); default: print it")
    parser.add_argument("--output-dir", type=Path, help="write one result per run here (required for a folder)")
    return parser


def _options(args: argparse.Namespace) -> AnalysisOptions:
    return AnalysisOptions(
        mode="log" if args.from_log else "config" if args.from_config else "auto", platform=args.platform,
        framework=args.framework, model=args.model, model_size=args.model_size, gpu_name=args.gpu_name,
        skip_steps=args.skip_steps, returncode=args.returncode, run_index=args.run_index)


def _say(text: str) -> None:
    """One line a message (it may quote a file name or a log line: utils/io/sanitise.py)."""
    print(one_line(f"evaluate.extract: {text}", MESSAGE_CHARS), file=sys.stderr, flush=True)


GENERIC_PARTS = re.compile(r"logs?|output|outputs|pre_trainer|rank-x|x|attempt_\d+|events\.x|tb_logs|version_\d+")


def _slug(key: str) -> str:
    """A short file-name-safe name of a run: the last two path parts of its key that are not generic."""
    parts = [re.sub(r"\.(log|txt|out|err)$", "", p) for p in key.replace("*", "x").split("/")]
    named = [p for p in parts if not GENERIC_PARTS.fullmatch(p)] or parts
    return re.sub(r"[^A-Za-z0-9.]+", "-", "-".join(named[-2:])).strip("-.")[-60:].strip("-.") or "run"


def output_name(output_dir: Path, result: Result, key: str, taken: set[Path]) -> Path:
    """``train_<platform>_<framework>_<model>_from-<run>.json``: one file per run, never two runs in one."""
    def named(origin: str) -> Path:
        return result_path(output_dir, result.platform, result.framework, result.model, result.run_index,
                           origin=origin)

    path = named(_slug(key))
    number = 2
    while path in taken:
        path = named(f"{_slug(key)}-{number}")
        number += 1
    taken.add(path)
    return path


def _steps(result: Result) -> str:
    if not result.step_times:
        return "0"
    last = result.first_step + (len(result.step_times) - 1) * result.step_interval
    every = f" every {result.step_interval}" if result.step_interval > 1 else ""
    return f"{len(result.step_times)} ({result.first_step}-{last}{every})"


def _row(found: str, files: int, result: Result | None, outcome: str, status: str = "skipped") -> list[str]:
    if result is None:
        return [found, str(files), "-", "-", "-", status, outcome]
    job = f"{result.platform}/{result.framework}/{result.model}"
    status = result.status + (f": {result.error}" if result.error else "")
    return [found, str(files), result.source.format or "-", job, _steps(result), status, outcome]


@dataclass
class FolderReport:
    rows: list[list[str]]
    written: list[Result]
    unusable: int  # runs recognised as training logs that could not become a result


def extract_folder(root: Path, output_dir: Path, options: AnalysisOptions) -> FolderReport:
    """Every run under ``root`` -> one result file in ``output_dir``, and the table rows."""
    found = discover(root, progress=_say)
    report = FolderReport([], [], 0)
    taken: set[Path] = set()
    for index, run in enumerate(found.runs, start=1):
        _say(f"[{index}/{len(found.runs)}] {run.key} ({len(run.files)} file(s))")
        try:
            analysis = analyse_run(run.files, options)
        except (LogInputError, ConfigError, OSError) as exc:
            report.unusable += 1
            report.rows.append(_row(run.key, len(run.files), None, str(exc), status="unusable"))
            continue
        found.skipped += analysis.skipped
        if analysis.result is None:
            continue
        path = output_name(output_dir, analysis.result, run.key, taken)
        write_result(path, analysis.result)
        report.written.append(analysis.result)
        report.rows.append(_row(run.key, analysis.used, analysis.result, str(path)))
    report.rows += [_row(str(path.relative_to(root)), 1, None, reason) for path, reason in found.skipped]
    return report


def _folder(args: argparse.Namespace, options: AnalysisOptions) -> int:
    if args.output_dir is None:
        _say(f"{args.path} is a folder: pass --output-dir for its results")
        return 2
    if args.output or args.returncode is not None:
        _say("--output and --returncode are for a single file, not a folder")
        return 2
    try:
        report = extract_folder(args.path, args.output_dir, options)
    except (ResultError, OSError) as exc:
        _say(f"cannot write results: {exc}")
        return 2
    if report.rows:
        print(console_table(HEADERS, report.rows))
    written, unusable = len(report.written), report.unusable
    not_ok = sum(r.status != "ok" for r in report.written)
    _say(f"{written} result(s) written to {args.output_dir} ({not_ok} not ok), {unusable} run(s) unusable")
    if not written and not unusable:
        _say(f"nothing recognisable under {args.path}: no Megatron-LM, Primus or NeMo log and no TensorBoard event "
             "file with training scalars")
        return 2
    return 1 if not_ok or unusable else 0


def _single(args: argparse.Namespace, options: AnalysisOptions) -> int:
    if args.path.stat().st_size > BIG_FILE_BYTES:
        _say(f"reading {args.path} ({args.path.stat().st_size / 1024**2:,.0f} MiB)...")
    try:
        analysis = analyse_files([args.path], options)
    except LogInputError as exc:
        _say(str(exc))
        return 2
    result = analysis.result
    assert result is not None  # analyse_files raises instead
    try:
        if args.output or args.output_dir:
            target = args.output or output_name(args.output_dir, result, args.path.name, set())
            write_result(target, result)
            _say(f"{target} status={result.status}" + (f" ({result.error})" if result.error else "")
                 + f" [workload from {'config.env' if analysis.mode == 'config' else 'the log'}]")
        else:
            print(json.dumps(result.model_dump(mode="json"), indent=2, allow_nan=False))
    except (ResultError, OSError) as exc:
        _say(str(exc))
        return 2
    return 0 if result.status == "ok" else 1


@exits_on_config_error("evaluate.extract")
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.skip_steps is not None and args.skip_steps < 0:
        _say("--skip-steps must be 0 or more")
        return 2
    options = _options(args)
    if args.from_config:  # config.env is this run's workload: a bad value is said first, before any log is read
        load_config()
    if args.path.is_dir():
        return _folder(args, options)
    if not args.path.is_file():
        _say(f"no such log file or folder: {args.path}")
        return 2
    return _single(args, options)


if __name__ == "__main__":
    sys.exit(main())
