"""bench/load.py in its quick mode: both readers run as a user runs them and every figure is reported (none asserted:
they are measurements, recorded in docs/PERFORMANCE.md)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers.paths import REPO


@pytest.mark.slow
def test_the_load_bench_reports_both_readers(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.load import main

    assert main(["all", "--quick"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["bench"], r["size"]) for r in rows] == [("compare", 12), ("extract", 500)], sys.executable
    for row in rows:
        assert row["exit_code"] == 0 and row["wall_s"] > 0 and row["cpu_s"] > 0 and row["peak_rss_mib"] > 0
        assert len(row["load_before"]) == 3 and {"limit_s", "limit_mib", "within_limits"} <= set(row)
    assert (REPO / "bench" / "load.py").exists()
