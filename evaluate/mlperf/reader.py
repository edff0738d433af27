"""A fast MLLOG reader whose events are mlperf-logging's own: its parser is this reader's oracle.

Why: mlp_parser decodes every line with ``json.loads``, and NVIDIA's v5.1 logs carry a ``tracked_stats`` line per step
(26 s on 2 cores against the import's 5 s budget). The importer never reads those, so such a line is kept as text;
every other line is decoded as the parser decodes it (tests/unit/evaluate/mlperf/test_reader.py holds them equal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import compress
from typing import Any

TOKEN = ":::MLLOG "
# The key the importer never reads (a per-step line in NVIDIA's logs): such a line, in mllog's layout, is kept as text.
LAZY_KEY = "tracked_stats"
_LAZY_MARK = f', "key": "{LAZY_KEY}", "value": '


@dataclass(slots=True)
class Event:
    """One MLLOG record: ``key`` and ``timestamp`` (ms, a float, as the parser's ``LogLine``) and its body."""

    key: str
    timestamp: float
    value: Any
    metadata: Any

    @property
    def meta(self) -> dict[str, Any]:
        """The metadata as a mapping (empty when a foreign log wrote something else)."""
        return self.metadata if isinstance(self.metadata, dict) else {}


@dataclass
class Log:
    """One log's records: its events (all but the lazy key's), the lazy key's lines as text (never decoded by the
    importer), the records that failed ``(text, why)`` as the parser reports them, and the file's line count."""

    events: list[Event]
    lazy: list[str]
    failed: list[tuple[str, str]]
    lines: int

    def lazy_events(self) -> list[Event]:
        """The lazy lines decoded (the oracle test's; the importer never asks)."""
        return [_decoded(_record(line)[len(TOKEN):]) for line in self.lazy]


def _record(line: str) -> str:
    """The parser's ``strip_and_dedup``: the text from the line's last ``TOKEN`` on, stripped."""
    return line[line.rfind(TOKEN):].strip()


def _decoded(body: str) -> Event:
    """The parser's ``string_to_logline``: any problem is a ValueError (where the parser raises some others)."""
    try:
        record = json.loads(body)
        event = Event(record["key"], float(record["time_ms"]), record["value"], record["metadata"])
    except (KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"not an MLLOG record: {type(exc).__name__} {exc}") from None
    if not isinstance(event.key, str):
        raise ValueError("not an MLLOG record: its key is no string")
    return event


def read_log(raw: bytes) -> Log:
    """The records of one MLLOG file's bytes (Latin-1, as the parser opens it)."""
    text = raw.decode("latin-1")
    if "\r" in text:  # universal newlines, as the parser's text file splits them
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    records = [line for line in lines if TOKEN in line]
    # a line of the lazy key in mllog's layout: the key once, one token, the metadata object closing the line
    lazy = [_LAZY_MARK in line and line.count('"key"') == 1 and line.count(TOKEN) == 1 and line.rstrip()[-2:] == "}}"
            for line in records]
    events: list[Event] = []
    failed: list[tuple[str, str]] = []
    for line in compress(records, [not flag for flag in lazy]):
        record = _record(line)
        try:
            if not record.startswith(TOKEN):
                raise ValueError("does not match regex")
            events.append(_decoded(record[len(TOKEN):]))
        except ValueError as exc:
            failed.append((record, str(exc)))
    return Log(events, list(compress(records, lazy)), failed, len(lines) - (1 if text.endswith("\n") else 0))
