"""evaluate/compare.py: figures, Markdown report, refusal of unfair comparisons, robustness."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

from evaluate.analysis.results import load_directory
from evaluate.analysis.stats import ratio_estimate
from evaluate.analysis.summary import cross_platform_parities, summarize_group
from evaluate.compare import main as compare_main
from evaluate.render.markdown import MISMATCH_LINE
from evaluate.render.plots import ENERGY_PANEL_TITLES, comparison_figure, loss_parity_figure
from evaluate.render.tables import console_table
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from tests.helpers.hermetic import cache_environ
from tests.helpers.paths import FIXTURES, REPO
from tests.helpers.proc import run_module


def run_compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = compare_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def per_run_tps(paths: list[Path]) -> list[float]:
    return [json.loads(p.read_text())["performance_metrics"]["tokens_per_second_per_gpu"] for p in paths]


@pytest.fixture(scope="session")
def tran_result(sample_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real tiny tran llama run on cpu, through the real launcher (shared by the slow tests here)."""
    from tests.helpers.workload import tiny_environ

    out = tmp_path_factory.mktemp("tran-results")
    proc = run_module("train.launch.launcher", "--platform", "cpu", "--framework", "tran", "--model", "llama",
                      env=tiny_environ(sample_data_dir, out), timeout=600)
    path = out / "train_cpu_tran_llama.json"
    assert proc.returncode == 0 and path.is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return path


@pytest.mark.slow
def test_real_tran_result_validates_and_compares(tran_result: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(tran_result, results / tran_result.name)
    assert validate_main([str(results)]) == 0, capsys.readouterr().out
    code, stdout, stderr = run_compare(capsys, "--results-dir", str(results))
    assert code == 0, stderr
    data = json.loads(tran_result.read_text())
    tps = data["performance_metrics"]["tokens_per_second_per_gpu"]
    report = (results / "compare.md").read_text()
    assert report.splitlines()[0] == "# tprimat comparison"
    assert "## Llama 3.1 8B" in report
    assert f"{tps:,.1f} (1 run)" in report
    # Only the cpu platform: the per-platform framework table, and honest n/a for what cpu cannot measure.
    assert "### CPU frameworks side by side" in report
    assert "not measured (platform cpu" in report
    assert f"{tps:,.1f} (1 run)" in stdout
    assert (results / "compare.png").stat().st_size > 10_000
    assert not (results / "loss_parity.png").exists()  # no second platform to compare with


def test_version_1_results_are_compared_after_migration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Results kept from before the typed model still validate and compare (utils/schema/v1.py migrates them)."""
    fixtures = FIXTURES / "results_v1"
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(fixtures / "tran_cpu_ok.json", results / "train_cpu_tran_llama.json")
    shutil.copy(fixtures / "tran_cpu_failed.json", results / "train_cpu_tran_qwen.json")
    old = json.loads((fixtures / "tran_cpu_ok.json").read_text())
    assert old["schema_version"] == 1
    assert validate_main([str(results / "train_cpu_tran_llama.json")]) == 0, capsys.readouterr().out
    code, stdout, stderr = run_compare(capsys, "--results-dir", str(results))
    assert code == 0, stderr
    tps = old["performance_metrics"]["tokens_per_second_per_gpu"]
    report = (results / "compare.md").read_text()
    assert f"| CPU Transformers (tran) | 1 ok | {tps:,.1f} (1 run) |" in report
    assert "| CPU Transformers (tran) | 1 failed | - |" in report
    assert "FP8=true is not supported by tran" in report
    assert f"{tps:,.1f} (1 run)" in stdout


def test_console_table_is_plain_text_with_numbers_aligned() -> None:
    table = console_table(["name", "tokens/s/GPU", "note"], [["AMD Primus", "13,012.3 [12,190.1, 13,827.9]", None],
                                                             ["NVIDIA NeMo", "654.9 (1 run)", "[bold]x[/]"]])
    lines = table.splitlines()
    assert lines[0].split() == ["name", "tokens/s/GPU", "note"]
    assert set(lines[1]) == {"-"}  # an ASCII rule under the header, no box-drawing characters
    assert all(line.isascii() and line == line.rstrip() for line in lines)
    assert lines[2].index("13,012.3") < lines[3].index("654.9")
    assert lines[2].index("]") == lines[3].index(")")  # numbers right-aligned: their last characters line up
    assert lines[2].endswith("n/a") and lines[3].endswith("[bold]x[/]")  # cells are text, never markup


def test_cross_platform_report_figures_and_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    amd = [make_result(out, "amd", "prim", run_index=k, seed=k, step_time=1.2 + 0.03 * k) for k in (1, 2, 3)]
    nvd = [make_result(out, "nvd", "nemo", run_index=k, seed=10 + k, step_time=1.5 + 0.02 * k) for k in (1, 2, 3)]
    make_result(out, "nvd", "mega", status="failed")
    code, stdout, stderr = run_compare(capsys, "--results-dir", str(out), "--price-per-gpu-hour", "amd=2.5",
                                       "nvd=3.0")
    assert code == 0, stderr
    report = (out / "compare.md").read_text()
    lines = report.splitlines()
    assert lines[0] == "# tprimat comparison"
    assert lines[2].startswith("**Fairness check: FAIR")

    # Repeated runs: the median of the per-run throughputs, and the ratio with its interval from both sides.
    amd_tps, nvd_tps = per_run_tps(amd), per_run_tps(nvd)
    assert f"| AMD Primus | 3 ok | {statistics.median(amd_tps):,.1f} [" in report
    ratio = ratio_estimate(amd_tps, nvd_tps)
    assert ratio is not None and ratio.low < ratio.value < ratio.high
    assert f"| AMD Primus | NVIDIA NeMo | {ratio.value:,.3f}x [{ratio.low:,.3f}, {ratio.high:,.3f}] |" in report
    assert f"AMD/NVIDIA AMD Primus vs NVIDIA NeMo: {ratio.value:,.3f}x" in stdout

    # Cost per 1T tokens from the price option: price / (tokens/s/GPU * 3600) * 1e12.
    cost = 2.5 / (statistics.median(amd_tps) * 3600) * 1e12
    assert f"${cost:,.0f} [" in report
    # tokens/kWh comes from the power block, never invented.
    assert "tokens/kWh" in report

    # A failed run is shown as failed and not averaged in.
    assert "| NVIDIA Megatron-LM | 1 failed | - |" in report
    assert "| train_nvd_mega_llama.json | failed | run failed in a test (15 of 30 steps done) |" in report

    # Loss parity on identical data.
    assert "### Loss-curve parity between platforms" in report
    assert "| AMD Primus | NVIDIA NeMo | 30 | 1.0000 |" in report

    assert (out / "compare.png").stat().st_size > 10_000
    assert (out / "loss_parity.png").stat().st_size > 10_000
    assert "![loss parity](loss_parity.png)" in report


def test_figure_has_every_panel(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim", run_index=1, seed=1)
    make_result(out, "amd", "prim", run_index=2, seed=2, step_time=1.6)
    make_result(out, "nvd", "mega", seed=3)
    by_model = {m: [summarize_group(g) for g in gs] for m, gs in load_directory(out).groups().items()}
    figure = comparison_figure(by_model)
    assert [ax.get_title() for ax in figure.axes] == list(ENERGY_PANEL_TITLES)  # the results measured energy
    throughput = figure.axes[0]
    assert [t.get_text() for t in throughput.get_xticklabels()] == ["amd \u00b7 prim", "nvd \u00b7 mega"]
    # whiskers for the repeated AMD runs (an errorbar collection exists)
    assert throughput.containers and any(c.errorbar for c in throughput.containers if hasattr(c, "errorbar"))
    loss_axes = figure.axes[1]
    assert len(loss_axes.get_lines()) == 2
    parity = loss_parity_figure([p for m in by_model for p in cross_platform_parities(by_model[m])])
    titles = [ax.get_title() for ax in parity.axes]
    assert titles[0] == "Loss parity: Llama 3.1 8B, amd \u00b7 prim vs nvd \u00b7 mega"
    assert titles[1].startswith("Relative loss gap: Llama 3.1 8B (correlation ")


@pytest.mark.parametrize(
    ("overrides", "key"),
    [({"SL": "4096"}, "SL"), ({"GA": "4"}, "GBS"), ({"FP8": "true"}, "FP8"),
     ({"tokenizer_vocab": "v2"}, "tokenizer hash")],
    ids=["seq-len", "global-batch", "precision", "tokenizer"],
)
def test_mismatch_is_refused_unless_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: dict,
                                            key: str) -> None:
    out = tmp_path / "out"
    make_result(out, "amd", "prim")
    make_result(out, "nvd", "nemo", **overrides)
    code, _, stderr = run_compare(capsys, "--results-dir", str(out))
    assert code == 1
    assert "refusing to compare different workloads" in stderr
    assert f"[llama] {key} differs" in stderr
    assert not (out / "compare.md").exists() and not (out / "compare.png").exists()

    code, stdout, _ = run_compare(capsys, "--results-dir", str(out), "--allow-mismatch")
    assert code == 0
    report = (out / "compare.md").read_text()
    assert report.splitlines()[0] == MISMATCH_LINE
    assert f"[llama] {key} differs" in report
    assert stdout.startswith("WARNING: workloads differ")


def test_invalid_and_truncated_files_are_skipped_with_warning(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    good = make_result(out, "amd", "prim")
    make_result(out, "nvd", "nemo")
    (out / "train_nvd_mega_llama.json").write_text(good.read_text()[:300], encoding="utf-8")  # truncated
    data = json.loads(good.read_text())
    del data["performance_metrics"]
    (out / "train_amd_mega_llama.json").write_text(json.dumps(data), encoding="utf-8")  # schema-invalid
    code, _, stderr = run_compare(capsys, "--results-dir", str(out))
    assert code == 0
    assert "warning: skipping" in stderr
    assert "train_nvd_mega_llama.json" in stderr and "not valid JSON (truncated?)" in stderr
    assert "train_amd_mega_llama.json" in stderr and "performance_metrics" in stderr
    report = (out / "compare.md").read_text()
    assert "## Skipped files" in report
    assert "`train_nvd_mega_llama.json`" in report and "`train_amd_mega_llama.json`" in report


def test_empty_or_unusable_directory_exits_nonzero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run_compare(capsys, "--results-dir", str(tmp_path))
    assert code == 2
    assert "no valid train_*.json results" in stderr
    (tmp_path / "train_amd_prim_llama.json").write_text("{", encoding="utf-8")
    code, _, stderr = run_compare(capsys, "--results-dir", str(tmp_path))
    assert code == 2
    assert "skipping" in stderr and "nothing to compare" in stderr
    code, _, stderr = run_compare(capsys, "--results-dir", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in stderr


def test_single_platform_framework_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_result(out, "nvd", "mega", step_time=1.8, seed=1)
    make_result(out, "nvd", "nemo", step_time=1.4, seed=2)
    code, stdout, _ = run_compare(capsys, "--results-dir", str(out))
    assert code == 0
    report = (out / "compare.md").read_text()
    assert "### NVIDIA frameworks side by side" in report
    assert "| framework | status | tokens/s/GPU | avg step (s) | final loss | total step time |" in report
    assert "Highest throughput: **NVIDIA NeMo**" in report
    assert "AMD / NVIDIA" not in report
    console_lines = stdout.splitlines()
    header = next(line for line in console_lines if line.startswith("framework "))  # readable console table
    assert header.split() == ["framework", "status", "tokens/s/GPU", "avg", "step", "(s)", "final", "loss", "total",
                              "step", "time"]
    assert any(line.startswith("NeMo ") and "1 ok" in line for line in console_lines)


def test_reference_shown_and_misconfiguration_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Tuned Llama 3.1 8B, BF16, SL 8192, GBS 128, 8x H100: matches the dgxc references (10,253.5 tokens/s/GPU).
    # tokens/s/GPU = GBS*SL/8/step = 128*8192/8/step = 131,072/step.
    out = tmp_path / "out"
    make_result(out, "nvd", "nemo", step_time=13.2, PROFILE="tuned")
    make_result(out, "nvd", "mega", step_time=40.0, seed=4, PROFILE="tuned")
    code, stdout, _ = run_compare(capsys, "--results-dir", str(out))
    assert code == 0
    report = (out / "compare.md").read_text()
    assert "### Published references" in report
    assert "NVIDIA DGX Cloud Benchmarking v25.02, Llama 3.1 8B pre-training, BF16" in report
    nemo_row = next(line for line in report.splitlines() if line.startswith("| NVIDIA NeMo (tuned) | NVIDIA DGX"))
    assert "% of the reference" in nemo_row and "MISCONFIGURED" not in nemo_row and "| full |" in nemo_row
    mega_row = next(line for line in report.splitlines()
                    if line.startswith("| NVIDIA Megatron-LM (tuned) | NVIDIA DGX"))
    assert "LIKELY MISCONFIGURED" in mega_row
    assert "LIKELY MISCONFIGURED" in stdout


def test_bad_price_option_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        compare_main(["--results-dir", str(tmp_path), "--price-per-gpu-hour", "intel=3"])
    assert info.value.code == 2
    assert "PLATFORM one of amd, nvd, cpu" in capsys.readouterr().err


def test_help_and_shell_wrapper(tmp_path: Path) -> None:
    repo = REPO
    # A bare environment, less the home folder's caches: matplotlib's font list goes to the checkout's.
    proc = run_module("evaluate.compare", "--help", env={"PATH": "/usr/bin:/bin", **cache_environ(repo)})
    assert proc.returncode == 0 and "--allow-mismatch" in proc.stdout
    wrapper = subprocess.run(["bash", str(repo / "evaluate" / "compare.sh"), "--results-dir", str(tmp_path)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert wrapper.returncode == 2
    assert "no valid train_*.json results" in wrapper.stderr


def test_a_model_layers_proxy_carries_its_label_into_groups_tables_and_plots(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "out"
    for platform in ("amd", "nvd"):
        make_result(out, platform, "tran", MODEL_LAYERS="8", MODELS="llama")
    label = "Llama 3.1 8B [8 of 32 layers]"
    loaded = load_directory(out)
    assert list(loaded.groups()) == [label]
    assert all(r.result.model_shape.num_layers == 8 and r.result.training_config.model_layers == 8
               for r in loaded.results)
    code, stdout, _ = run_compare(capsys, "--results-dir", str(out), "--output-dir", str(tmp_path / "cmp"))
    assert code == 0 and label in stdout
    assert label in (tmp_path / "cmp" / "compare.md").read_text()
