"""bench/monitor_overhead.py: the quick cpu mode runs end to end and reports every figure it promises."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from tests.helpers.proc import run_module


def test_quick_mode_reports_the_overhead_with_its_interval(tiny_env: Callable[..., dict[str, str]],
                                                           tmp_path: Path) -> None:
    out = tmp_path / "overhead.json"
    proc = run_module("bench.monitor_overhead", "--quick", "--model", "llama", "--json", str(out),
                      env=tiny_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    off, on = figures["median_step_s"]["off"], figures["median_step_s"]["on"]
    assert off > 0 and on > 0
    low, high = figures["overhead_percent_95ci"]
    assert low <= figures["overhead_percent"] <= high  # the point estimate sits inside its interval
    assert all(math.isfinite(v) for v in (low, high, figures["overhead_percent"]))
    assert figures["overhead_percent"] == 100 * figures["overhead_per_step_s"] / off
    assert figures["direct_monitor_cost_s"] > 0
    assert figures["blocks"]["quads"] == 3 and figures["quick"] is True
    assert figures["timer"] == "host clock (cpu)" and figures["target_percent"] == 0.1
    assert figures["workload"]["precision"]  # the attribute the crash was about
    for line in ("overhead per step:", "95% interval", "monitor calls alone:", "not judged (--quick"):
        assert line in proc.stdout, proc.stdout


def test_bad_arguments_exit_2() -> None:
    from bench.monitor_overhead import main

    try:
        main(["--quads", "0"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--quads 0 was accepted")
