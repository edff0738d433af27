"""A bad configuration at a command line: one ``config error: ...`` line on stderr and exit status 2.

Every tprimat CLI says a bad ``config.env`` value (or environment override) the same way, so the shell
scripts and the tests can tell it from the command's own failures (status 1). The words and the status are
written here once; a CLI's ``main`` lets :class:`~utils.config.rules.ConfigError` escape and wears
:func:`exits_on_config_error`, which keeps ``main`` returning an ``int`` like every other exit it has.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec

from utils.config.rules import ConfigError

EXIT_CONFIG = 2

P = ParamSpec("P")


def exits_on_config_error(prog: str = "") -> Callable[[Callable[P, int]], Callable[P, int]]:
    """Decorate a CLI's ``main``: a ``ConfigError`` it raises becomes ``[prog: ]config error: ...`` and 2.

    ``prog`` is the prefix the CLI puts before its other messages, when it has one (``data.clean``,
    ``evaluate.extract``); without it the line starts with ``config error:``.
    """
    head = f"{prog}: config error" if prog else "config error"

    def decorate(main: Callable[P, int]) -> Callable[P, int]:
        @functools.wraps(main)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except ConfigError as exc:
                print(f"{head}: {exc}", file=sys.stderr, flush=True)
                return EXIT_CONFIG

        return guarded

    return decorate
