"""bench/history_bench.py in its quick mode: add, trend and gate run as a user runs them and report every figure
(none asserted: they are measurements, recorded in docs/PERFORMANCE.md)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_the_history_bench_reports_its_three_figures(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.history_bench import main

    assert main(["all", "--quick"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [(r["bench"], r["size"]) for r in rows] == [("add", 24), ("trend", 240), ("gate", 50)]
    for row in rows:
        assert row["exit_code"] == 0 and row["wall_s"] > 0 and row["peak_rss_mib"] > 0, row
        assert row["command"].startswith(".venv/bin/python -m evaluate.") and len(row["load_before"]) == 3
