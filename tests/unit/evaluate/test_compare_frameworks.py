"""The per-platform framework comparison (seed 004): 2x2 figure and console tables per platform."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.analysis.results import load_directory
from evaluate.analysis.summary import summarize_group
from evaluate.compare import main as compare_main
from evaluate.render.frameworks import HEADERS, PANEL_TITLES, console_text, framework_figure, on_platform, rows
from tests.helpers.evaluate import make_result

# (framework, model, step time): on NVIDIA every framework of the platform, three models.
NVD_RUNS = [(f, m, t) for m, base in (("llama", 1.0), ("qwen", 0.9), ("mistral", 0.8))
            for f, t in (("mega", base), ("nemo", base * 1.1), ("tran", base * 1.6), ("deep", base * 1.3))]


def _by_model(results: Path) -> dict:
    return {model: [summarize_group(g) for g in groups] for model, groups in load_directory(results).groups().items()}


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    out.mkdir()
    for framework, model, step_time in NVD_RUNS:
        make_result(out, "nvd", framework, model, step_time=step_time)
    make_result(out, "amd", "prim", "llama", step_time=1.2)
    make_result(out, "amd", "deep", "llama", step_time=2.0, status="failed")
    return out


def test_console_tables_per_model_and_winners(results: Path) -> None:
    by_model = _by_model(results)
    text = console_text("nvd", on_platform(by_model, "nvd"))
    assert "NVIDIA - FRAMEWORK PERFORMANCE COMPARISON" in text and "Hardware: NVIDIA H100 80GB HBM3" in text
    for title in ("LLAMA 3.1 8B COMPARISON", "QWEN 2.5 7B COMPARISON", "MISTRAL 7B V0.3 COMPARISON"):
        assert title in text
    header = next(line for line in text.splitlines() if line.startswith("Framework"))
    assert header.split() == ["Framework", "Status", "Tokens/s/GPU", "Avg", "Step", "Time", "Final", "Loss",
                              "Total", "Time"]
    # Megatron on Mistral has the shortest step, hence the highest throughput of all twelve.
    assert "Highest throughput: Megatron-LM Mistral 7B v0.3" in text
    assert "Fastest step time: Megatron-LM Mistral 7B v0.3" in text
    assert "Performance range: 2.00x between Megatron-LM Mistral 7B v0.3 and Transformers (tran) Llama 3.1 8B" \
        in text  # 1.6 s / 0.8 s


def test_rows_use_the_measured_figures_and_list_failures_as_such(results: Path) -> None:
    by_model = _by_model(results)
    nvd_llama = [s for s in on_platform(by_model, "nvd") if s.group.model == "llama"]
    assert [r[0] for r in rows(nvd_llama)] == ["Megatron-LM", "NeMo", "Transformers (tran)", "DeepSpeed"]
    for row, summary in zip(rows(nvd_llama), nvd_llama, strict=True):
        assert len(row) == len(HEADERS)
        assert row[2] == f"{summary.tokens_per_gpu.value:,.1f}"
        assert row[3] == f"{summary.avg_step_time.value:.3f}s"
        assert row[4] == f"{summary.final_loss:.4f}"
        assert row[5] == f"{summary.step_time_total_s:,.1f}s"
    amd = rows(on_platform(by_model, "amd"))
    assert amd[1][:2] == ["DeepSpeed", "1 failed"] and amd[1][2:] == ["n/a"] * 4


def test_figure_is_seed_004s_two_by_two(results: Path) -> None:
    summaries = on_platform(_by_model(results), "nvd")
    figure = framework_figure("nvd", summaries)
    axes = figure.axes
    assert [ax.get_title() for ax in axes] == list(PANEL_TITLES)
    throughput, loss, trace, average = axes
    assert len(throughput.patches) == len(average.patches) == 12  # 4 frameworks x 3 models
    assert len(loss.get_lines()) == len(trace.get_lines()) == 12
    labels = [t.get_text() for t in throughput.get_xticklabels()]
    assert "DeepSpeed\nMistral 7B v0.3" in labels and "NeMo\nQwen 2.5 7B" in labels
    heights = {label: patch.get_height() for label, patch in zip(labels, throughput.patches, strict=True)}
    mega = next(s for s in summaries if (s.group.framework, s.group.model) == ("mega", "mistral"))
    assert heights["Megatron-LM\nMistral 7B v0.3"] == pytest.approx(mega.tokens_per_gpu.value)


def test_compare_writes_one_figure_per_platform_and_prints_the_tables(results: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert compare_main(["--results-dir", str(results), "--allow-mismatch"]) == 0
    out = capsys.readouterr().out
    for platform in ("amd", "nvd"):
        assert (results / f"compare_{platform}_frameworks.png").stat().st_size > 10_000
        assert str(results / f"compare_{platform}_frameworks.png") in out
    assert "AMD - FRAMEWORK PERFORMANCE COMPARISON" in out and "NVIDIA - FRAMEWORK PERFORMANCE COMPARISON" in out
    assert not (results / "compare_cpu_frameworks.png").exists()
    report = (results / "compare.md").read_text()
    assert "## Mistral 7B v0.3" in report and "NVIDIA DeepSpeed" in report
