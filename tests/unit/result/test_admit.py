"""utils/result/admit.py, the one gate every reader of results reads through: each bound broken alone is refused.

Each forged result below breaks exactly one bound of ``utils/measure/plausible.py`` or of the MLPerf re-check, so a
bound that went missing fails its own case (a forgery breaking two would pass with either one gone).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluate.analysis.results import load_results
from evaluate.analysis.validation import validate_paths
from evaluate.history.ingest import add_paths
from evaluate.history.store import open_database
from tests.helpers.evaluate import make_result, workload_config
from tests.helpers.history import cli
from tests.helpers.mlperf import FULL, mlperf_result
from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation
from utils.result.admit import Refused, Unreadable, admit, refusals
from utils.result.file import ResultError, read_result, result_path
from utils.result.mllog import mllog_path, mlperf_record
from utils.schema.model import Result

EVAL = {"EVAL_INTERVAL": "320", "EVAL_SAMPLES": "64", "TARGET_LOSS": "4.0"}  # every 5 steps at GBS 64


def _quality(result: Result) -> None:
    """Evaluations at steps 5..20 (losses 6.0, 4.5, 3.9, 3.5), 1.5 s a step: the target 4.0 reached at step 15."""
    cfg = workload_config(**EVAL)
    evaluations = [make_evaluation(cfg, step=5 * (i + 1), loss=loss, seconds=7.5 * (i + 1), eval_seconds=0.5)
                   for i, loss in enumerate([6.0, 4.5, 3.9, 3.5])]
    result.quality = build_quality(cfg, evaluations, reduction=PER_TOKEN_MEAN, held_out=FIXED_SET,
                                   platform=result.platform, gpus=8,
                                   energy_reason="not measured in a test")


def _evaluation(index: int, **changes: object) -> Callable[[dict], None]:
    return lambda data: data["quality"]["evaluations"][index].update(changes)


def _truncate(steps: int) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        for key in ("step_times", "loss_values", "learning_rates", "memory_allocated_gb"):
            data[key] = data[key][:steps]
    return change


# bound -> (how the written result is forged, words of the one reason it must give)
FORGERIES: dict[str, tuple[Callable[[dict], None], str]] = {
    "loss below 0": (lambda d: d["loss_values"].__setitem__(4, -0.5), "loss -0.5 at step 5"),
    "loss above the bound": (lambda d: d["loss_values"].__setitem__(4, 1e18), "loss 1e+18 at step 5"),
    "eval loss below 0": (_evaluation(3, loss=-1e17), "eval loss -1e+17 at step 20"),
    "eval loss above the bound": (_evaluation(0, loss=1e18), "eval loss 1e+18 at step 5"),
    "evaluation after the run": (_truncate(18), "evaluation at step 20 is after the 18 steps"),
    "samples not step x GBS": (_evaluation(0, samples=319, tokens=319 * 2048), "319 samples, but step x GBS = 320"),
    "tokens not samples x SL": (_evaluation(0, tokens=320 * 2048 + 1), "tokens, but samples x SL = 655360"),
    "evaluation later than the run": (_evaluation(3, seconds=1e12), "ended 1e+12 s into a run of"),
    "GPU-hours": (lambda d: d["quality"].update(gpu_hours_to_target=1e6), "GPU-hours to target, but"),
    "torch build": (lambda d: d["gpu_info"].update(pytorch_version="2.13.0+cpu"), "torch 2.13.0+cpu is a cpu build"),
    "software stack": (lambda d: d["gpu_info"].update(software_stack="rocm"), "ran on the rocm software stack"),
    "device vendor": (lambda d: d["gpu_info"].update(device_name="AMD Instinct MI300X"), "device is platform amd's"),
    "MFU reason": (lambda d: d["gpu_info"].update(peak_tflops_reason="no accelerator on platform cpu: no MFU"),
                   "its MFU reason says it ran on platform cpu"),
}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_result(tmp_path_factory.mktemp("genuine"), "nvd", "mega", mutate=_quality, **EVAL)


def test_a_genuine_result_of_each_platform_is_admitted(genuine: Path, tmp_path: Path) -> None:
    assert admit(genuine).quality is not None
    for platform in ("cpu", "amd"):
        assert refusals(read_result(make_result(tmp_path / platform, platform, "tran"))) == []


@pytest.mark.parametrize("bound", FORGERIES)
def test_each_bound_broken_alone_is_refused_with_its_reason(genuine: Path, tmp_path: Path, bound: str) -> None:
    forge, words = FORGERIES[bound]
    data = json.loads(genuine.read_text())
    forge(data)
    forged = tmp_path / genuine.name
    forged.write_text(json.dumps(data))
    with pytest.raises(Refused) as refused:
        admit(forged)
    assert len(refused.value.reasons) == 1 and words in refused.value.reasons[0], refused.value.reasons
    assert refused.value.result.platform == "nvd" and str(forged) in str(refused.value)



@pytest.mark.parametrize("bound", FORGERIES)
def test_every_reader_refuses_what_compare_refuses(genuine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   bound: str) -> None:
    """One mutated figure, every reader: compare and the page leave it out, validate calls it INVALID with its
    reason, ``history add`` stores it as refused (never a baseline), the gate refuses it as a candidate."""
    forge, words = FORGERIES[bound]
    data = json.loads(genuine.read_text())
    forge(data)
    forged = tmp_path / genuine.name
    forged.write_text(json.dumps(data))
    loaded = load_results([forged])
    assert not loaded.results and words in loaded.skipped[0][1], "compare and the page leave it out"
    report = validate_paths([forged])
    assert not report.ok and any(words in error for error in report.checks[0].errors), "validate: INVALID"
    db = str(tmp_path / "history.sqlite")
    with open_database(db, create=True) as opened:
        _, messages = add_paths(opened, [forged])
    assert len(messages) == 1 and "stored as refused, never a baseline" in messages[0] and words in messages[0]
    stored = json.loads(cli(capsys, "list", "--db", db, "--json").stdout)
    assert [(r["status"], r["baseline_ok"]) for r in stored] == [("refused", False)], "the database marks it"
    proc = cli(capsys, "--db", db, "--candidate", str(forged), "--baseline", "1", module="evaluate.gate")
    assert proc.returncode == 2 and proc.stderr.startswith("gate: candidate refused:") and words in proc.stderr

def test_a_cpu_result_on_a_gpu_stack_is_refused(tmp_path: Path) -> None:
    path = make_result(tmp_path, "cpu", "tran")
    data = json.loads(path.read_text())
    data["gpu_info"]["software_stack"] = "cuda"
    path.write_text(json.dumps(data))
    assert refusals(read_result(path)) == ["platform cpu, but it ran on the cuda software stack"]


def test_what_is_no_result_file_is_unreadable_or_invalid(tmp_path: Path) -> None:
    fifo = tmp_path / "train_nvd_mega_llama.json"
    os.mkfifo(fifo)
    with pytest.raises(Unreadable, match="a FIFO, not a result file"):
        admit(fifo)
    broken = tmp_path / "train_amd_mega_llama.json"
    broken.write_text("{")
    with pytest.raises(ResultError) as error:
        admit(broken)
    assert not isinstance(error.value, (Unreadable, Refused))


@pytest.fixture(scope="module")
def mlperf_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run MLPerf's checker fails (amd, the target missed) and one it passes (nvd), each with its MLLOG beside."""
    out = tmp_path_factory.mktemp("mlperf")
    paths = {}
    for platform, framework, losses in (("amd", "prim", [4.2, 3.6]), ("nvd", "nemo", [4.1, 3.29])):
        path = result_path(out, platform, framework, "llama", None, "mlperf")

        def check(result: Result, path: Path = path) -> None:
            result.mlperf = mlperf_record(result, mllog_path(path))

        paths[platform] = mlperf_result(out, losses, platform, framework, mutate=check, **FULL)
    return paths


def test_an_mlperf_verdict_is_re_checked_against_the_mllog_beside_it(mlperf_runs: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    assert admit(mlperf_runs["nvd"]).mlperf.verdict == "SUCCESS"
    assert admit(mlperf_runs["amd"]).mlperf.verdict == "FAILED"
    forged = tmp_path / mlperf_runs["amd"].name  # the failed run claiming SUCCESS, its own MLLOG beside it
    data = json.loads(mlperf_runs["amd"].read_text())
    data["mlperf"]["verdict"] = "SUCCESS"
    forged.write_text(json.dumps(data))
    mllog_path(forged).write_bytes(mllog_path(mlperf_runs["amd"]).read_bytes())
    with pytest.raises(Refused) as refused:
        admit(forged)
    assert refused.value.reasons == [f"its MLPerf verdict SUCCESS, but MLPerf's checker on "
                                     f"{mllog_path(forged).name} says FAILED"]
    mllog_path(forged).unlink()
    with pytest.raises(Refused, match="cannot be re-checked: no readable MLLOG"):
        admit(forged)
