"""The result file: build, finalise, validate, write atomically and read the typed :class:`Result`.

The only place that turns a ``Result`` (``utils/schema/model.py``) into a file and back: validated as a whole on
write and read, written atomically, a version-1 file migrated on read (``utils/schema/v1.py``). ``result_guard``
makes "a run always leaves a result" hold in-process (a signal or exception writes what was measured, with the
reason); :func:`update_result` replaces fields that must change together in one validated step.
CLI: ``python -m utils.result.file status FILE | check FILE... | schema [--write]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from utils.config.model import Config
from utils.io.atomic import atomic_write_text
from utils.io.json_input import JsonInputError, parse_json, read_json_text
from utils.io.output_path import output_file
from utils.io.sanitise import one_line
from utils.machine.environment import capture_environment
from utils.result.failures import final_status
from utils.result.names import mark_output_dir, result_name
from utils.result.run_claim import write_problem
from utils.schema.hardware import Environment, GpuInfo
from utils.schema.measures import Source
from utils.schema.model import RESULT_LIMITS, SCHEMA_PATH, SCHEMA_VERSION, Result, unknown_name
from utils.schema.run import Fingerprint, ModelShapeBlock, TrainingConfig, Workload
from utils.schema.v1 import migrate
from utils.spec.models import ModelShape

SCHEMA_ID = f"tprimat/result/v{SCHEMA_VERSION}"
STATUSES = ("ok", "incomplete", "failed")
STARTED_ERROR = "run started but did not finish"


class ResultError(ValueError):
    """A result file is missing, unreadable or does not match the schema."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def result_path(output_dir: Path, platform: str, framework: str, model: str, run_index: int | None = None,
                profile: str = "identical", origin: str | None = None) -> Path:
    """``train_<platform>_<framework>_<model>[_tuned|_mlperf][_r<k>][_from-<origin>].json`` (``utils/result/names.py``):
    identical and tuned results of one job live side by side. Built from registry names only and resolved by
    ``utils/io/output_path.py``, so no value can lead it outside ``output_dir``."""
    for kind, name in (("platform", platform), ("framework", framework), ("model", model)):
        problem = unknown_name(kind, name)
        if problem:
            raise ValueError(problem)
    return output_file(Path(output_dir), result_name(platform, framework, model, run_index, profile, origin))


def _first_problem(exc: ValidationError, where: str) -> ResultError:
    """A one-line error naming ``where``, the field path and the first problem pydantic found. The path may hold a
    foreign file's key: shown through ``one_line`` (no line break, bounded)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    location = "/".join(one_line(part, 60) for part in first["loc"]) or "(top level)"
    return ResultError(f"{where}: {location}: {one_line(first['msg'], 300)}")


def _validated(data: Any, where: str, strict: bool = False) -> Result:
    """``data`` (a dict or a Result, possibly mutated in place since it was built) checked as a whole. ``strict`` (files
    read): pydantic's strict mode, so ``"8456"`` or ``true`` is no number. A result built in memory is validated as it
    is built; its dump is checked strictly on write as well."""
    if isinstance(data, Result):
        data = data.model_dump()
    try:
        return Result.model_validate(data, strict=strict)
    except ValidationError as exc:
        raise _first_problem(exc, where) from None
    except RecursionError:  # a foreign object nested past the interpreter's limit (read_json bounds files)
        raise ResultError(f"{where}: nested too deeply to validate") from None


def update_result(result: Result, **fields: Any) -> Result:
    """Replace several top-level fields of ``result`` at once, in place, only once the whole result validates
    (a failed update changes nothing); returns it."""
    unknown = set(fields) - set(Result.model_fields)
    if unknown:
        raise ResultError(f"result: unknown field(s) {', '.join(sorted(unknown))}")
    current = {name: getattr(result, name) for name in Result.model_fields}
    try:
        checked = Result.model_validate({**current, **fields})
    except ValidationError as exc:
        raise _first_problem(exc, "result") from None
    for name in fields:
        result.__dict__[name] = checked.__dict__[name]
    result.__pydantic_fields_set__.update(fields)
    return result


def training_config(cfg: Config, precision_effective: str | None = None) -> TrainingConfig:
    """Every workload key actually used, plus the older tools' five names so their readers keep working.
    ``precision_effective`` defaults to the configuration's label (``Config.precision_label``)."""
    return TrainingConfig(
        max_steps=cfg.train_iters, global_batch_size=cfg.gbs, micro_batch_size=cfg.mbs, sequence_length=cfg.sl,
        num_gpus=cfg.world_size, workload=Workload(**cfg.workload()), nnodes=cfg.nnodes,
        gpus_per_node=cfg.gpus_per_node, precision_effective=precision_effective or cfg.precision_label,
        model_layers=cfg.model_layers,
    )


def new_result(
    cfg: Config | None,
    *,
    platform: str,
    framework: str,
    model: str,
    shape: ModelShape,
    gpu_info: GpuInfo,
    source: Source,
    run_index: int | None = None,
    launcher_env: dict[str, str] | None = None,
    fingerprint: Fingerprint | None = None,
    precision_effective: str | None = None,
    training: TrainingConfig | None = None,
    environment: Environment | None = None,
) -> Result:
    """A result that is valid from the first moment: ``incomplete`` until finalized. ``training`` and
    ``environment`` stand in for a run tprimat did not launch (a foreign log's workload and machine)."""
    if training is None:
        if cfg is None:
            raise ValueError("new_result needs a config or a training block")
        training = training_config(cfg, precision_effective)
    return Result(
        status="incomplete", error=STARTED_ERROR, platform=platform, framework=framework, model=model,
        run_index=run_index, profile=cfg.profile if cfg is not None else "identical", started_at=now_iso(),
        gpu_info=gpu_info, environment=environment or Environment(**capture_environment(launcher_env)),
        training_config=training, model_shape=ModelShapeBlock(**shape.as_dict()),
        fingerprint=fingerprint, source=source,
    )


def finalize_result(result: Result, status: str, error: str | None) -> Result:
    """Set the final status, reason and ``finished_at`` (in place) by :func:`utils.result.failures.final_status`;
    the steps expected run from ``first_step`` to ``TRAIN_ITERS`` at ``step_interval``. Returns ``result``."""
    done = len(result.step_times)
    last = result.training_config.max_steps
    if last is None:
        return _finish(result, status, error, done)
    expected = (last - result.first_step) // result.step_interval + 1 if last >= result.first_step else done
    return _finish(result, status, error, expected)


def _finish(result: Result, status: str, error: str | None, expected_steps: int) -> Result:
    if status not in STATUSES:
        raise ValueError(f"status {status!r}: allowed values are {', '.join(STATUSES)}")
    quality = result.quality
    if quality is not None and quality.stopped_at_target and quality.evaluations:
        # STOP_AT_TARGET ended the run after the evaluation at the target (issue 34): an ok ending, not a short run
        expected_steps = min(expected_steps, quality.evaluations[-1].step)
    status, error = final_status(status, error, len(result.step_times), expected_steps)
    return update_result(result, status=status, error=error, finished_at=now_iso())


def write_result(path: Path, result: Result) -> Path:
    """Validate the whole result, then write it atomically (temp file in the same directory + rename). A process of a
    job run that no longer owns the file (``utils/files/run_owner.py``: an orphan of a stopped job, a run that ended)
    does not write: the write is dropped with one line, and ``path`` returned."""
    path = Path(path)
    dropped = write_problem(path)
    if dropped:
        print(f"result: {dropped}", file=sys.stderr)
        return path
    checked = _validated(result, str(path), strict=True)
    text = json.dumps(checked.model_dump(mode="json"), indent=2, allow_nan=False) + "\n"
    written = atomic_write_text(path, text, fsync=True)
    mark_output_dir(path.parent)  # tprimat's output folder: shell/wrap.sh packs only such folders
    return written


def read_result(path: Path) -> Result:
    """Load and validate one result as foreign input; a version-1 file is migrated. Read under
    ``utils/io/json_input.py``'s limits and the largest result a run can write (``RESULT_LIMITS``), validated strictly
    (a number written as a string is refused); every problem is a one-line :class:`ResultError`. Two ways to one answer:
    pydantic parses and validates in one step (half the time, which bounds compare, the page and ``history add`` on
    thousands of files), and a refused file is read again the long way, which migrates version 1 and names the first
    problem. Both accept and read the same (tests/unit/result/test_result_reader_paths.py)."""
    path = Path(path)
    try:
        text = read_json_text(path, max_bytes=RESULT_LIMITS.max_bytes, max_values=RESULT_LIMITS.max_values,
                              max_containers=RESULT_LIMITS.max_containers)
    except JsonInputError as exc:
        raise ResultError(str(exc)) from None
    try:
        return Result.model_validate_json(text, strict=True)
    except (ValueError, RecursionError):  # ValidationError is a ValueError
        return read_the_long_way(text, one_line(path, 400))  # a version-1 file, or the first problem named


def read_the_long_way(text: str, where: str) -> Result:
    """``text`` parsed by ``json`` under the number rules of utils/io/json_input.py, then validated: the way
    :func:`read_result` takes for a file the one step refuses."""
    try:
        data = parse_json(text, where, allow_nan=True)  # non-finite: the model names it
    except JsonInputError as exc:
        raise ResultError(str(exc)) from None
    if not isinstance(data, dict):
        raise ResultError(f"{where}: (top level): a result is a JSON object, not {type(data).__name__}")
    if data.get("schema_version") == 1:

        try:
            data = migrate(data)
        except Exception as exc:  # any shape of foreign file is one line, never a traceback
            raise ResultError(f"{where}: schema version 1 file cannot be migrated: {one_line(exc)}") from None
        return _validated(data, f"{where} (migrated from schema version 1)", strict=True)
    return _validated(data, where, strict=True)


class Interrupted(BaseException):
    """Raised in the main thread when SIGINT/SIGTERM arrives during a guarded run."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def result_guard(
    path: Path | None,
    result: Result,
    fill: Callable[[Result], None],
    expected_steps: int,
) -> Iterator[None]:
    """Run a measured block so that a result is written however it ends. ``fill(result)`` copies the measurement so far
    into ``result``; a normal exit is ``ok`` with ``expected_steps`` steps recorded, else ``incomplete``. ``path=None``
    (non-zero ranks) measures but writes nothing."""
    previous: dict[int, Any] = {}

    def _raise(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, _raise)
    status, error = "ok", None
    try:
        yield
    except Interrupted as exc:
        status, error = "incomplete", f"interrupted by {exc} before the run finished"
        raise
    except BaseException as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}".strip()
        raise
    finally:
        if in_main:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        fill(result)
        _finish(result, status, error, expected_steps)
        if path is not None:
            write_result(path, result)


def status_of(path: Path) -> str:
    """One word for summaries: ok|incomplete|failed|missing|invalid."""
    path = Path(path)
    if not path.exists():
        return "missing"
    try:
        return read_result(path).status
    except ResultError:
        return "invalid"


def schema_text() -> str:
    """``utils/schema/schema.json`` as generated from :class:`utils.schema.model.Result`."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
              **Result.model_json_schema()}
    return json.dumps(schema, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.result.file", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_status = sub.add_parser("status", help="print ok|incomplete|failed|missing|invalid for one result file")
    p_status.add_argument("file", type=Path)
    p_check = sub.add_parser("check", help="validate result files against the schema; non-zero exit on failure")
    p_check.add_argument("files", type=Path, nargs="+")
    p_schema = sub.add_parser("schema", help="print the JSON schema generated from the typed result model")
    p_schema.add_argument("--write", action="store_true", help=f"write it to {SCHEMA_PATH.name} instead")
    args = parser.parse_args(argv)
    if args.command == "status":
        print(status_of(args.file))
        return 0
    if args.command == "schema":
        if args.write:
            atomic_write_text(SCHEMA_PATH, schema_text())
            print(f"wrote {SCHEMA_PATH}", file=sys.stderr)
        else:
            sys.stdout.write(schema_text())
        return 0
    failed = 0
    for file in args.files:
        try:
            print(f"{file}: valid ({read_result(file).status})")
        except ResultError as exc:
            print(f"invalid: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
