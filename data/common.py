"""Shared plumbing of the data stages: errors, JSONL streaming, CLI glue.

Every stage fails the same way: a :class:`DataError` or a filesystem error becomes ``<stage>: error: <message>``
and exit 1, nothing written under its final name until complete; each holds ``DATA_DIR``'s lock
(``utils/files/locks.py``); SIGINT and SIGTERM unwind like an error and exit with 128 + the signal.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import Config
from utils.config.rules import DATASETS
from utils.dataset.paths import TokenizerMissingError
from utils.files.locks import LockError, LockHeld, data_lock_path, hold
from utils.io.json_input import JsonInputError, parse_json
from utils.io.sanitise import one_line
from utils.spec.registry import model_names

EXIT_FAILURE = 1


class DataError(RuntimeError):
    """A data stage cannot produce a trustworthy output. The message names the file and the problem."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def iter_jsonl_texts(path: Path) -> Iterator[str]:
    """Stream the ``text`` field of a JSONL file, one document at a time (bounded memory)."""
    try:
        stream = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: input not found (run the previous data stage first)") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with stream:
        try:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line) if "[" not in line and line.count("{") <= 1 else parse_json(
                        line, f"{one_line(path, 400)}:{number}")  # a nested line: depth-checked (issue 33)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                except JsonInputError as exc:
                    raise DataError(str(exc)) from None
                text = record.get("text") if isinstance(record, dict) else None
                if not isinstance(text, str):
                    raise DataError(f"{path}:{number}: expected an object with a string 'text' field")
                if _SURROGATE.search(text):  # "\\ud800" in JSON: a str no UTF-8 writer takes (issue 33)
                    raise DataError(f"{path}:{number}: the text holds a lone surrogate (an escaped half of a UTF-16 "
                                    "pair): not encodable as UTF-8")
                yield text
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None


def write_jsonl_line(stream, text: str) -> None:
    stream.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


def base_parser(prog: str, description: str, per_model: bool = False) -> argparse.ArgumentParser:
    """Options every stage shares (``--model`` for a stage that works per model); defaults come from
    ``load_config()``. ``prog`` is the stage's name in every line it prints (:func:`run_stage`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dataset", help=f"override DATASET ({' | '.join(DATASETS)} | local:<path>)")
    parser.add_argument("--data-dir", type=Path, help="override DATA_DIR")
    parser.add_argument("--force", action="store_true", help="redo the work even if the manifest says it is current")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (logs, CI)")
    if per_model:
        parser.add_argument("--model", action="append", choices=model_names(),
                            help="model(s) to process (repeatable; default: MODELS from config.env)")
    return parser


def config_from_args(args: argparse.Namespace, **stage_options: str) -> Config:
    """``load_config()`` with the command-line overrides applied and re-validated; ``stage_options`` maps a stage's
    own option to the config field it overrides, e.g. ``min_chars="min_doc_chars"``."""
    cfg = load_config()
    changes: dict[str, object] = {}
    if args.dataset:
        changes["dataset"] = args.dataset
    if args.data_dir:
        changes["data_dir"] = args.data_dir.expanduser().resolve()
    if getattr(args, "model", None):
        changes["models"] = tuple(dict.fromkeys(args.model))
    cfg = cfg.replace(**changes) if changes else cfg
    for option, key in stage_options.items():
        if getattr(args, option) is not None:
            cfg = cfg.replace(**{key: getattr(args, option)})
    return cfg


class StageInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a stage: unwinds it like Ctrl+C, remembering which signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _interrupt(signum: int, _frame: object) -> None:
    raise StageInterrupted(signum)


def run_stage(body: Callable[[argparse.Namespace], None], parser: argparse.ArgumentParser,
              argv: Sequence[str] | None) -> int:
    """Parse, lock ``DATA_DIR``, run, and turn expected failures into one clear line (named by the parser's
    ``prog``) and a non-zero exit."""
    return exits_on_config_error(parser.prog)(_run_stage)(parser.prog, body, parser, argv)


def _run_stage(prog: str, body: Callable[[argparse.Namespace], None], parser: argparse.ArgumentParser,
               argv: Sequence[str] | None) -> int:
    args = parser.parse_args(argv)
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        data_dir = config_from_args(args).data_dir
        with hold(data_lock_path(data_dir), f"DATA_DIR {data_dir}"):
            body(args)
    except (DataError, TokenizerMissingError, LockHeld, LockError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:  # a full disk, a read-only or vanished DATA_DIR
        where = f" {exc.filename}" if exc.filename else ""
        print(f"{prog}: error: cannot read or write{where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, StageInterrupted) else signal.SIGINT
        print(f"{prog}: interrupted by {signal.Signals(signum).name}; no partial output was kept", file=sys.stderr)
        return 128 + signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
