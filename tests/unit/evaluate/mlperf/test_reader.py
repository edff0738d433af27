"""The fast MLLOG reader gives mlperf-logging's parser's events (key, value, time, metadata) and failures."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import parse_file

from evaluate.mlperf.reader import Log, read_log

RULESET = "5.1.0"


def _same(path: Path, log: Log, oracle: tuple[list, list] | None = None) -> None:
    lines, failed = oracle or parse_file(str(path), RULESET)
    theirs = [(line.key, line.timestamp, line.value) for line in lines]
    ours = [(e.key, e.timestamp, {"value": e.value, "metadata": e.metadata}) for e in log.events + log.lazy_events()]
    assert [t for t in theirs if t[0] != "tracked_stats"] == [t for t in ours if t[0] != "tracked_stats"]  # in order
    assert sorted(map(repr, theirs)) == sorted(map(repr, ours))  # the kept lines: the same records
    assert failed == log.failed


def test_the_sample_logs_read_as_the_parser_reads_them(parsed):
    """Three logs of each of the nine systems (27 of 90: the parser takes a second per 3 MB; ``python -m bench.mlperf
    parse TREE`` compares all 390 of v5.1, docs/PERFORMANCE.md)."""
    assert len(parsed) == 27
    kept = 0
    for path, oracle in parsed.items():
        log = read_log(path.read_bytes())
        _same(path, log, oracle)
        kept += len(log.lazy)
    assert kept > 15_000  # NVIDIA's per-step lines were kept as text, not decoded


LINE = ('{"namespace": "", "time_ms": %s, "event_type": "POINT_IN_TIME", "key": "%s", "value": %s, '
        '"metadata": {"file": "x.py", "lineno": 1}}')


@pytest.mark.parametrize("text", [
    ":::MLLOG " + LINE % (1, "run_start", "null") + "\r\n0: :::MLLOG " + LINE % (2, "tracked_stats", '{"a": 1}'),
    "noise :::MLLOG junk :::MLLOG " + LINE % (3, "tracked_stats", "1") + "   \n",  # the last token counts
    ":::MLLOG " + LINE % (5, "tracked_stats", '{"key": "run_stop"}') + "\n",  # two keys: decoded, not kept
    ":::MLLOG " + LINE % (6, "eval_accuracy", "NaN") + "\n:::MLLOG \n:::MLLOG [1\n:::MLLOG {\"a\": [}\n",
    ":::MLLOG " + LINE % ('"7.5"', "run_stop", "null") + "\n" + ":::MLLOG " + LINE % (8, "x", "1")[:40],  # cut
    "a line\n\x85:::MLLOG " + LINE % (9, "seed", "1") + "\x85tail\n",  # NEL is no line break for a text file
])
def test_awkward_lines_read_as_the_parser_reads_them(tmp_path, text):
    """Prefixes, carriage returns, two tokens, broken JSON, a string time, a cut line: where the parser has an
    answer (it raises on a record that is JSON but no MLLOG record; this reader calls that a failed line)."""
    path = tmp_path / "result_0.txt"
    path.write_bytes(text.encode("latin-1"))
    log = read_log(path.read_bytes())
    _same(path, log)


def test_what_the_parser_cannot_read_is_a_failed_line_here(tmp_path):
    """A JSON record without its members ends the parser with a KeyError or TypeError; here it is a failed line."""
    log = read_log(b':::MLLOG {"key": 1}\n:::MLLOG [1]\n:::MLLOG ' + (LINE % (1, "seed", "1")).encode() + b"\n")
    assert [why.split(":")[0] for _, why in log.failed] == ["not an MLLOG record"] * 2
    assert [e.key for e in log.events] == ["seed"]


def test_a_per_step_line_broken_inside_is_kept_unread(tmp_path):
    """The one documented difference (reader.py): a tracked_stats line of mllog's shape is not decoded, so JSON
    broken inside it is not seen here; the parser fails it. The importer never reads it; --check runs the checker."""
    line = ":::MLLOG " + LINE % (4, "tracked_stats", '{"a": }')
    path = tmp_path / "result_0.txt"
    path.write_text(line + "\n")
    assert len(parse_file(str(path), RULESET)[1]) == 1
    log = read_log(path.read_bytes())
    assert log.lazy == [line] and not log.failed
