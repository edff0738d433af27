"""evaluate/render/plots.py and evaluate/render/frameworks.py read at a glance: colours per framework, axes fit the
measured steps.

The figures are rendered from results built through the real result API and checked through matplotlib's
objects (colours, limits, labels), never pixels.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_hex

from evaluate.analysis.results import load_directory
from evaluate.analysis.summary import summarize_group
from evaluate.render.frameworks import framework_figure, on_platform
from evaluate.render.plots import (
    ENERGY_PANEL_TITLES,
    PANEL_TITLES,
    TITLE_AVG_STEP,
    TITLE_ENERGY,
    TITLE_LOSS,
    TITLE_STEP_TRACE,
    TITLE_THROUGHPUT,
    comparison_figure,
    left_out_panels,
    model_figure,
    save_figure,
)
from tests.helpers.evaluate import make_result
from utils.spec.registry import FRAMEWORK_COLORS, framework_color


def by_model(out: Path) -> dict:
    return {m: [summarize_group(g) for g in gs] for m, gs in load_directory(out).groups().items()}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", seed=1, step_time=2.0)
    make_result(out, "nvd", "tran", seed=2, step_time=2.4)
    make_result(out, "amd", "mega", seed=3, step_time=2.2)
    make_result(out, "amd", "prim", seed=4, step_time=1.9)
    return out


def test_the_palette_gives_every_framework_its_own_colour() -> None:
    assert len(set(FRAMEWORK_COLORS.values())) == len(FRAMEWORK_COLORS)
    assert framework_color("unknown") not in FRAMEWORK_COLORS.values()


def test_one_colour_per_framework_and_one_style_per_platform(results: Path, tmp_path: Path) -> None:
    figure = comparison_figure(by_model(results))
    assert [ax.get_title() for ax in figure.axes] == list(ENERGY_PANEL_TITLES)  # energy measured: 7 panels
    loss = figure.axes[1]
    lines = {line.get_label(): line for line in loss.get_lines()}
    assert set(lines) == {"nvd \u00b7 mega", "nvd \u00b7 tran", "amd \u00b7 mega", "amd \u00b7 prim"}
    for label, line in lines.items():
        _platform, framework = label.split(" \u00b7 ")
        assert to_hex(line.get_color()) == FRAMEWORK_COLORS[framework].lower(), label
    # the same framework on two platforms: one colour, two line styles and markers
    assert lines["nvd \u00b7 mega"].get_color() == lines["amd \u00b7 mega"].get_color()
    assert lines["nvd \u00b7 mega"].get_linestyle() != lines["amd \u00b7 mega"].get_linestyle()
    assert lines["nvd \u00b7 mega"].get_marker() != lines["amd \u00b7 mega"].get_marker()
    bars = figure.axes[0].patches
    assert [to_hex(b.get_facecolor()) for b in bars] == [FRAMEWORK_COLORS[f].lower()
                                                        for f in ("mega", "prim", "mega", "tran")]
    save_figure(figure, tmp_path / "compare.png")


def test_the_step_time_axis_fits_the_measured_steps(results: Path) -> None:
    models = by_model(results)
    figure = comparison_figure(models)
    trace = figure.axes[2]
    low, high = trace.get_ylim()
    measured, warmup = [], []
    for summary in models["llama"]:
        result = summary.representative.result
        skip = result.performance_metrics.skipped_steps
        measured += result.step_times[skip:]
        warmup += result.step_times[:skip]
    assert low <= min(measured) and high >= max(measured)
    assert max(warmup) > high  # the slow first step (3x) is drawn but does not set the axis
    assert high - low < 0.25 * max(warmup)
    assert any("warm-up off scale" in t.get_text() for t in trace.texts)
    assert any("warm-up" in str(p.get_label()) for p in trace.patches)  # the shaded warm-up span


def test_the_loss_panel_shows_the_convergence_band(results: Path) -> None:
    loss = comparison_figure(by_model(results), band=0.10).axes[1]
    (band,) = [c for c in loss.collections if "convergence band" in str(c.get_label())]
    assert "10%" in band.get_label()
    (lowest, highest) = band.get_paths()[0].get_extents().intervaly
    assert highest / lowest == pytest.approx(1.05 / 0.95, rel=1e-6)


def test_without_energy_there_is_no_energy_panel(tmp_path: Path) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", with_power=False)
    figure = comparison_figure(by_model(out))
    assert [ax.get_title() for ax in figure.axes] == list(PANEL_TITLES) and TITLE_ENERGY not in PANEL_TITLES


def test_the_platform_figure_uses_the_same_palette_and_fit(results: Path) -> None:
    summaries = on_platform(by_model(results), "nvd")
    figure = framework_figure("nvd", summaries)
    loss, trace = figure.axes[1], figure.axes[2]
    for line in loss.get_lines():
        framework = line.get_label().split(" \u00b7 ")[1]
        assert to_hex(line.get_color()) == FRAMEWORK_COLORS[framework].lower()
    top = trace.get_ylim()[1]
    first_steps = [s.representative.result.step_times[0] for s in summaries]
    assert all(first > top for first in first_steps)


def _cpu_like(result) -> None:  # type: ignore[no-untyped-def]
    """What a cpu run records: no MFU (no peak FLOP/s), no device memory, no energy."""
    result.performance_metrics.mfu_reason = "no peak FLOP/s for this cpu"
    result.performance_metrics.mfu = None
    result.memory_metrics = None


def test_a_comparison_without_memory_and_mfu_draws_no_empty_panel(tmp_path: Path) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "tran", with_power=False, mutate=_cpu_like)
    make_result(out, "nvd", "mega", with_power=False, mutate=_cpu_like, seed=1)
    models = by_model(out)
    figure = comparison_figure(models)
    assert [ax.get_title() for ax in figure.axes] == [TITLE_THROUGHPUT, TITLE_LOSS, TITLE_STEP_TRACE, TITLE_AVG_STEP]
    assert not any("not measured" in t.get_text() for ax in figure.axes for t in ax.texts)
    left_out = left_out_panels(models["llama"])
    assert len(left_out) == 3 and "no peak FLOP/s for this cpu" in left_out[-1]
    page = model_figure(models["llama"])
    assert page is not None and [ax.get_title() for ax in page.axes] == [TITLE_THROUGHPUT, TITLE_LOSS]
