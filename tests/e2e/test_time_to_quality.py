"""Time to quality on cpu (issue 34): tran and deep reach a stated target on the sample data and stop there.

The target, 6.9 nats per token, comes from this very workload measured on cpu (tran, SEED 42, the tiny workload of
tests/helpers/workload.py with EVAL_INTERVAL=16 samples, EVAL_SAMPLES=8, no target): the held-out loss was 7.279
after step 4, 6.735 after step 8 and 6.605 after step 12 (docs/PERFORMANCE.md, "Time to quality"). So both runs stop
at their second evaluation, after step 8 of 12, and end ok. One launcher run per framework, shared by the module.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import main_in_process, run_module
from tests.helpers.workload import tiny_environ
from utils.result.file import read_result
from utils.schema.model import Result

TARGET = "6.9"
EVAL = {"EVAL_INTERVAL": "16", "EVAL_SAMPLES": "8", "TARGET_LOSS": TARGET, "MODELS": "llama"}
pytestmark = pytest.mark.slow


def _launch(env: dict[str, str], framework: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc = run_module("train.launch.launcher", "--platform", "cpu", "--framework", framework, "--model", "llama",
                      env=env, timeout=900)
    return proc, Path(env["OUTPUT_DIR"]) / f"train_cpu_{framework}_llama.json"


@pytest.fixture(scope="module")
def runs(sample_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Result]]:
    """tran and deep with TARGET_LOSS=6.9, into one output folder."""
    out = tmp_path_factory.mktemp("ttq") / "output"
    done = {}
    for framework in ("tran", "deep"):
        proc, path = _launch(tiny_environ(sample_data_dir, out, **EVAL), framework)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "evaluation at step 8/12" in proc.stdout
        done[framework] = (path, read_result(path))
    return done


@pytest.mark.parametrize("framework", ["tran", "deep"])
def test_the_run_stops_at_the_target_and_ends_ok(runs: dict[str, tuple[Path, Result]], framework: str) -> None:
    _, result = runs[framework]
    quality = result.quality
    assert result.status == "ok" and result.error is None
    assert quality is not None and quality.reached and quality.stopped_at_target
    assert [e.step for e in quality.evaluations] == [4, 8] and len(result.step_times) == 8
    assert quality.evaluations[0].loss > float(TARGET) >= quality.evaluations[1].loss
    assert quality.samples_to_target == 8 * 4 and quality.tokens_to_target == 8 * 4 * 64
    assert quality.time_to_target_s == quality.evaluations[1].seconds > quality.evaluations[0].seconds > 0
    assert quality.energy_to_target_kwh is None and "cpu" in quality.null_reasons["energy_to_target_kwh"]
    assert quality.gpu_hours_to_target is None and quality.null_reasons["gpu_hours_to_target"]
    assert "stopped at target" in (quality.stop_reason or "")
    assert quality.reduction.startswith("per-token mean")


def test_validate_and_compare_show_the_time_to_quality(runs: dict[str, tuple[Path, Result]], sample_data_dir: Path,
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from evaluate.compare import main as compare_main
    from evaluate.validate import main as validate_main

    folder = runs["tran"][0].parent
    for key, value in tiny_environ(sample_data_dir, folder, **EVAL).items():  # the environment the commands had
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO)
    validated = main_in_process(validate_main, capsys, str(folder))
    assert validated.returncode == 0, validated.stdout[-3000:] + validated.stderr[-3000:]
    compared = main_in_process(compare_main, capsys, "--results-dir", str(folder), "--output-dir", str(tmp_path))
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
    text = (tmp_path / "compare.md").read_text()
    assert "### Time to quality" in text and (tmp_path / "quality.png").is_file()
