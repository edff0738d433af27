"""A bad configuration at a command line: one ``config error: ...`` line on stderr and exit status 2.

Every CLI says a bad ``config.env`` value the same way, so scripts and tests can tell it from the command's own
failures (status 1); the CLIs' other one-line answers are said here once too.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

from utils.config.rules import ConfigError
from utils.io.sanitise import MESSAGE_CHARS, one_line

EXIT_CONFIG = 2
EXIT_FAILED = 1

P = ParamSpec("P")
N = TypeVar("N", int, float)


def exits_on_config_error(prog: str = "") -> Callable[[Callable[P, int]], Callable[P, int]]:
    """Decorate a CLI's ``main``: a ``ConfigError`` it raises becomes ``[prog: ]config error: ...`` and 2. ``prog`` is
    the prefix the CLI puts before its other messages, when it has one (``data.clean``, ``evaluate.extract``); without
    it the line starts with ``config error:``."""
    head = f"{prog}: config error" if prog else "config error"

    def decorate(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except ConfigError as exc:
                print(f"{head}: {one_line(exc, MESSAGE_CHARS)}", file=sys.stderr, flush=True)
                return EXIT_CONFIG

        return guarded

    return decorate


def number_argument(convert: Callable[[str], N], noun: str, allowed: Callable[[N], bool],
                    outside: str) -> Callable[[str], N]:
    """An argparse ``type``: ``convert(text)``, refused in one line when it is no number (``'<text>' is not
    <noun>``) or not ``allowed`` (``outside``, formatted with ``text`` and ``value``); argparse adds the option."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{one_line(text, 40)!r} is not {noun}") from None
        if not allowed(value):
            raise argparse.ArgumentTypeError(outside.format(text=one_line(text, 40), value=value))
        return value

    return parse


class OneLineFailure:
    """An expected failure of a CLI's work as one ``<prog>: <why>`` line on stderr and status 1. ``with
    OneLineFailure(prog, errors) as failure:``; ``failure.status`` is 0 when nothing failed. With ``cannot`` (a verb) an
    ``OSError`` reads ``<prog>: cannot <verb> <file>: <why>``; any other exception passes through."""

    def __init__(self, prog: str, errors: tuple[type[BaseException], ...], cannot: str | None = None) -> None:
        self.prog = prog
        self.errors = errors
        self.cannot = cannot
        self.status = 0

    def __enter__(self) -> OneLineFailure:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if isinstance(exc, self.errors):
            print(f"{self.prog}: {one_line(exc, MESSAGE_CHARS)}", file=sys.stderr)
        elif self.cannot is not None and isinstance(exc, OSError):
            print(one_line(f"{self.prog}: cannot {self.cannot} {exc.filename or ''}: {exc.strerror or exc}",
                           MESSAGE_CHARS), file=sys.stderr)
        else:
            return False
        self.status = EXIT_FAILED
        return True
