"""The unified result (schema version 1): build, validate, write atomically, read.

Every framework, whether measured in-process (``tran``, ``nemo``) or extracted from
a log (``mega``, ``prim``), ends in the same JSON document described by
``utils/result_schema.json``. A result is validated when written and when read,
so a comparison never silently consumes a broken file. Writes go to a temp file
in the same directory and are renamed into place, so a crash never leaves a
half-written result.

``result_guard`` makes "a run always leaves a result" hold for in-process
measurement: SIGINT/SIGTERM or an exception write what was measured so far with
``status`` incomplete or failed and the reason.

CLI: ``python -m utils.result status FILE`` prints ok|incomplete|failed|missing|invalid;
``python -m utils.result check FILE...`` validates files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from utils.atomic import atomic_write_text
from utils.configure import Config
from utils.environment import capture_environment
from utils.models import ModelShape
from utils.result_model import GpuInfo

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("result_schema.json")
STATUSES = ("ok", "incomplete", "failed")


class ResultError(ValueError):
    """A result file is missing, unreadable or does not match the schema."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def result_path(output_dir: Path, platform: str, framework: str, model: str, run_index: int | None = None) -> Path:
    """``train_<platform>_<framework>_<model>.json``; repeated runs get ``_r<k>``."""
    suffix = f"_r{run_index}" if run_index is not None else ""
    return Path(output_dir) / f"train_{platform}_{framework}_{model}{suffix}.json"


def clean_number(value: Any) -> float | None:
    """JSON has no NaN/inf: non-finite numbers become null (validate flags them as non-finite)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def validate(result: Any, where: str = "result") -> None:
    """Raise :class:`ResultError` naming ``where`` and the first schema problem."""
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(result), key=lambda e: (len(e.absolute_path), list(e.absolute_path)))
    if errors:
        first = errors[0]
        location = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise ResultError(f"{where}: {location}: {first.message}")


def write_result(path: Path, result: dict[str, Any]) -> Path:
    """Validate, then write atomically (temp file in the same directory + rename)."""
    path = Path(path)
    validate(result, str(path))
    return atomic_write_text(path, json.dumps(result, indent=2, allow_nan=False) + "\n", fsync=True)


def read_result(path: Path) -> dict[str, Any]:
    """Load and validate one result; errors name the file and the first problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultError(f"{path}: unreadable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON (truncated?): {exc.msg} at line {exc.lineno}") from None
    validate(data, str(path))
    return data


def training_config(cfg: Config, precision_effective: str | None) -> dict[str, Any]:
    """Every workload key actually used, plus the older tools' names so their readers keep working."""
    return {
        "max_steps": cfg.train_iters,
        "global_batch_size": cfg.gbs,
        "micro_batch_size": cfg.mbs,
        "sequence_length": cfg.sl,
        "num_gpus": cfg.world_size,
        "gradient_accumulation": cfg.ga,
        "tensor_parallel": cfg.tp,
        "pipeline_parallel": cfg.pp,
        "context_parallel": cfg.cp,
        "data_parallel": cfg.dp,
        "nnodes": cfg.nnodes,
        "gpus_per_node": cfg.gpus_per_node,
        **cfg.workload(),
        "precision_effective": precision_effective,
    }


def new_result(
    cfg: Config,
    *,
    platform: str,
    framework: str,
    model: str,
    shape: ModelShape,
    gpu_info: GpuInfo,
    source_kind: str,
    log_path: Path | None = None,
    run_index: int | None = None,
    launcher_env: dict[str, str] | None = None,
    fingerprint: dict[str, Any] | None = None,
    precision_effective: str | None = None,
) -> dict[str, Any]:
    """A result that is valid from the first moment: ``incomplete`` until finalized."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "incomplete",
        "error": "run started but did not finish",
        "warnings": [],
        "platform": platform,
        "framework": framework,
        "model": model,
        "run_index": run_index,
        "started_at": now_iso(),
        "finished_at": None,
        "gpu_info": gpu_info.model_dump(),
        "environment": capture_environment(launcher_env),
        "training_config": training_config(cfg, precision_effective),
        "model_shape": shape.as_dict(),
        "fingerprint": fingerprint,
        "performance_metrics": None,
        "memory_metrics": None,
        "power_metrics": None,
        "step_times": [],
        "loss_values": [],
        "learning_rates": [],
        "memory_allocated_gb": [],
        "source": {"kind": source_kind, "log_path": str(log_path) if log_path else None},
    }


def finalize_result(result: dict[str, Any], status: str, error: str | None) -> dict[str, Any]:
    """Set the final status; ``ok`` requires no error, the others require a reason."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r}: allowed values are {', '.join(STATUSES)}")
    if status == "ok" and error:
        raise ValueError("status ok cannot carry an error")
    if status != "ok" and not error:
        raise ValueError(f"status {status} needs a reason")
    result["status"] = status
    result["error"] = error
    result["finished_at"] = now_iso()
    return result


class Interrupted(BaseException):
    """Raised in the main thread when SIGINT/SIGTERM arrives during a guarded run."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def result_guard(
    path: Path | None,
    result: dict[str, Any],
    fill: Callable[[dict[str, Any]], None],
    expected_steps: int,
) -> Iterator[None]:
    """Run a measured block so that a result is written however it ends.

    ``fill(result)`` copies the measurement so far into ``result`` (arrays and
    summary blocks). On normal exit the status is ``ok`` if ``expected_steps``
    steps were recorded, else ``incomplete``. ``path=None`` (non-zero ranks)
    measures but writes nothing.
    """
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
        done = len(result["step_times"])
        if status == "ok" and done < expected_steps:
            status, error = "incomplete", f"only {done} of {expected_steps} steps ran"
        elif status != "ok":
            error = f"{error} ({done} of {expected_steps} steps done)"
        finalize_result(result, status, error)
        if path is not None:
            write_result(path, result)


def status_of(path: Path) -> str:
    """One word for summaries: ok|incomplete|failed|missing|invalid."""
    path = Path(path)
    if not path.exists():
        return "missing"
    try:
        return str(read_result(path)["status"])
    except ResultError:
        return "invalid"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.result", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_status = sub.add_parser("status", help="print ok|incomplete|failed|missing|invalid for one result file")
    p_status.add_argument("file", type=Path)
    p_check = sub.add_parser("check", help="validate result files against the schema; non-zero exit on failure")
    p_check.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "status":
        print(status_of(args.file))
        return 0
    failed = 0
    for file in args.files:
        try:
            data = read_result(file)
            print(f"{file}: valid ({data['status']})")
        except ResultError as exc:
            print(f"invalid: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
