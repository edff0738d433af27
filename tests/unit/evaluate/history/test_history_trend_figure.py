"""``history trend``'s figure on a long series: thinned honestly (the title says how), one line per series per panel."""

from __future__ import annotations

import json

import numpy as np

from evaluate.history.trend import MAX_POINTS, Series, render_table, trend_figure


def _series(count: int, platform: str) -> Series:
    times = np.array([f"2025-{1 + k // 40_000:02d}-{1 + k % 28:02d}T{k % 24:02d}:00:00" for k in range(count)])
    times.sort()
    values = np.column_stack([np.linspace(1000, 2000, count), np.full(count, 0.4), np.full(count, np.nan)])
    statuses = np.array(["ok"] * (count - 1) + ["failed"])
    item = Series((platform, "mega", "llama", "identical", "H100"), np.arange(1, count + 1), times, statuses, values)
    item.changes = {count // 2: ["torch 2.6.0 -> 2.7.0"]}
    return item


def test_a_long_series_is_drawn_as_medians_and_the_title_says_so() -> None:
    long, short = _series(3 * MAX_POINTS, "nvd"), _series(50, "amd")
    figure = trend_figure([long, short])
    assert figure is not None
    axes = figure.axes
    assert len(axes) == 2, "no panel for tokens/kWh: no run measured it"
    title = axes[0].get_title()
    assert f"series of over {MAX_POINTS:,} ok runs drawn as medians of 3 consecutive runs per point" in title
    lines = axes[0].get_lines()
    assert len(lines) == 2 and len(lines[0].get_xdata()) <= MAX_POINTS + 1 and len(lines[1].get_xdata()) == 49
    assert len(axes[0].collections) == 1, "version changes: one set of dotted lines per panel"
    table = render_table([long], 2)
    assert f"{3 * MAX_POINTS} run(s)" in table and "failed" in table and table.count("\n") == 3
    assert json.dumps(long.key)  # keys are plain strings (the page and the table show them)
