"""Shared plumbing of the data stages: errors, JSONL streaming, CLI glue.

Every stage follows the same rules so a failure anywhere looks the same: a
:class:`DataError` becomes ``<stage>: error: <message>`` on stderr and exit code 1,
and nothing is written under its final name until it is complete.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path

from utils.config_rules import DATASETS
from utils.configure import Config, ConfigError, load_config
from utils.dataset import TokenizerMissingError
from utils.registry import model_names

EXIT_FAILURE = 1
EXIT_CONFIG = 2


class DataError(RuntimeError):
    """A data stage cannot produce a trustworthy output. The message names the file and the problem."""


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
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                text = record.get("text") if isinstance(record, dict) else None
                if not isinstance(text, str):
                    raise DataError(f"{path}:{number}: expected an object with a string 'text' field")
                yield text
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None


def write_jsonl_line(stream, text: str) -> None:
    stream.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


def tool_versions(*packages: str) -> dict[str, str | None]:
    """Installed versions of the packages whose behaviour shapes an output."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# ---------------------------------------------------------------------------
# command line


def base_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options every stage shares; defaults come from ``load_config()``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dataset", help=f"override DATASET ({' | '.join(DATASETS)} | local:<path>)")
    parser.add_argument("--data-dir", type=Path, help="override DATA_DIR")
    parser.add_argument("--force", action="store_true", help="redo the work even if the manifest says it is current")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (logs, CI)")
    return parser


def add_model_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", choices=model_names(),
                        help="model(s) to process (repeatable; default: MODELS from config.env)")


def config_from_args(args: argparse.Namespace) -> Config:
    """``load_config()`` with the command-line overrides applied and re-validated."""
    cfg = load_config()
    changes: dict[str, object] = {}
    if args.dataset:
        changes["dataset"] = args.dataset
    if args.data_dir:
        changes["data_dir"] = args.data_dir.expanduser().resolve()
    if getattr(args, "model", None):
        changes["models"] = tuple(dict.fromkeys(args.model))
    return cfg.replace(**changes) if changes else cfg


def run_stage(prog: str, body: Callable[[argparse.Namespace], None], parser: argparse.ArgumentParser,
              argv: Sequence[str] | None) -> int:
    """Parse, run, and turn expected failures into one clear line and a non-zero exit."""
    args = parser.parse_args(argv)
    try:
        body(args)
    except ConfigError as exc:
        print(f"{prog}: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (DataError, TokenizerMissingError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; no partial output was kept", file=sys.stderr)
        return 130
    return 0
