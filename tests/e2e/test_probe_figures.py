"""Issue 33, family 3: implausible figures are refused, not ranked (``utils/measure/plausible.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evaluate.analysis.results import load_directory
from evaluate.analysis.validation import validate_paths
from evaluate.compare import main as compare_main
from evaluate.gpu_check.check import build_check
from tests.helpers.devices import h100
from tests.helpers.evaluate import gpu_info, make_result, workload_config, workload_shape
from utils.files.run_owner import STARTED_REASON
from utils.machine import prescreen as ps
from utils.machine.device_facts import Fact
from utils.measure.plausible import implausible
from utils.result.file import new_result, read_result, write_result
from utils.schema.measures import Source

FLOOR, CEILING = "below the physical floor", "more than the hardware can do"
# Each breaks one bound of utils/measure/plausible.py alone (a forgery breaking both would pass with either bound gone):
# a tiny cpu model at 50 us a step is under the step floor but 259 TFLOP/s, within the cpu ceiling; a full Llama at
# 1 ms a step is above the floor but hundreds of times any peak, on cpu and on an H100 whose result says no MFU.
FORGED = {"step-floor": ("cpu", False, FLOOR, {"step_time": 5e-5, "MODEL_SIZE": "tiny", "SL": "128", "DP": "1",
                                                "GA": "1", "GPUS_PER_NODE": "1"}),
          "mfu-cpu": ("cpu", False, CEILING, {"step_time": 1e-3}),
          "mfu-h100-null": ("nvd", True, CEILING, {"step_time": 1e-3})}


def _forged(out: Path, platform: str, mfu_null: bool, **kwargs: object) -> Path:
    def no_mfu(result):
        result.performance_metrics = result.performance_metrics.model_copy(
            update={"mfu": None, "mfu_reason": "forged: left out", "peak_tflops": None})

    return make_result(out, platform, "tran", mutate=no_mfu if mfu_null else None, **kwargs)


@pytest.mark.parametrize("name", FORGED)
def test_a_forged_fast_result_is_invalid_and_left_out_of_compare(tmp_path: Path, name: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    platform, mfu_null, bound, kwargs = FORGED[name]
    out = tmp_path / "out"
    forged = _forged(out, platform, mfu_null, **kwargs)
    make_result(out, "amd", "tran")
    problems = implausible(read_result(forged))
    assert len(problems) == 1 and bound in problems[0], f"it breaks this bound alone: {problems}"
    report = validate_paths([forged])
    assert not report.ok and any(bound in error for error in report.checks[0].errors)
    code = compare_main(["--results-dir", str(out), "--allow-mismatch"])
    err = capsys.readouterr().err
    assert code == 0 and "cannot be true, left out" in err and bound in err and forged.name in err, err
    report_text = (out / "compare.md").read_text()
    skipped = [line for line in report_text.splitlines() if line.startswith(f"- `{forged.name}`: ")]
    assert len(skipped) == 1 and bound in skipped[0], "named among the skipped files, with its bound"
    assert forged.stem[len("train_"):] not in report_text.replace(skipped[0], ""), "and nowhere else"


def test_a_plausible_result_passes_the_bounds(tmp_path: Path) -> None:
    for platform in ("cpu", "nvd", "amd"):
        assert implausible(read_result(make_result(tmp_path / platform, platform, "tran"))) == []


def test_one_run_copied_to_repeats_counts_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    one = make_result(out, "nvd", "tran")
    for k in (1, 2, 3):
        shutil.copy(one, out / f"train_nvd_tran_llama_r{k}.json")
    loaded = load_directory(out)
    assert len(loaded.results) == 1 and len(loaded.duplicates) == 3
    assert compare_main(["--results-dir", str(out)]) == 0
    assert capsys.readouterr().err.count("is the same run as") == 3


def test_two_jobs_stopped_before_their_first_step_are_two_jobs(tmp_path: Path) -> None:
    """shell/train.sh's start records of tran and deep, written in the same second, differ only in their framework;
    gpu_check counted them as one run and said tran 'did not start' (CI, stop 55). Nothing was measured: no copy."""
    out = tmp_path / "out"
    out.mkdir()
    cfg = workload_config()
    started = new_result(cfg, platform="nvd", framework="tran", model="llama", shape=workload_shape(cfg, "llama"),
                         gpu_info=gpu_info("nvd"), source=Source(kind="callback"))
    started.error = STARTED_REASON
    for framework in ("tran", "deep"):
        write_result(out / f"train_nvd_{framework}_llama.json", started.model_copy(update={"framework": framework}))
    loaded = load_directory(out)
    assert sorted(r.result.framework for r in loaded.results) == ["deep", "tran"] and loaded.duplicates == []
    rows = {row.framework: row for row in build_check(out, "nvd", "llama", None, ("tran", "deep")).rows}
    assert rows["tran"].status == rows["deep"].status == "incomplete" and rows["tran"].error == STARTED_REASON


def test_one_cpu_run_relabelled_amd_and_nvd_makes_no_cross_vendor_headline(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(make_result(tmp_path / "cpu", "cpu", "tran").read_text())
    relabelled, dressed = tmp_path / "relabelled", tmp_path / "dressed"
    for platform in ("amd", "nvd"):  # the label alone, then the label and the whole gpu_info block of that platform
        for out, gpu in ((relabelled, data["gpu_info"]), (dressed, gpu_info(platform).model_dump(mode="json"))):
            out.mkdir(exist_ok=True)
            (out / f"train_{platform}_tran_llama.json").write_text(json.dumps({**data, "platform": platform,
                                                                                "gpu_info": gpu}))
    assert compare_main(["--results-dir", str(relabelled)]) != 0, "both refused: nothing to compare"
    err = capsys.readouterr().err
    assert err.count("but it ran on the cpu software stack") == 2, err
    assert compare_main(["--results-dir", str(dressed)]) == 0
    captured = capsys.readouterr()
    assert "train_nvd_tran_llama.json is the same run as train_amd_tran_llama.json" in captured.err, captured.err
    assert "NOTHING COMPARED" in (dressed / "compare.md").read_text() and "FAIR" not in captured.out


def _prescreen(path: Path, **changes: object) -> Path:
    record = ps.prescreen("nvd", h100(), {"model": Fact(value="NVIDIA H100 80GB HBM3"),
                                          "ecc_enabled": Fact(reason="fixture: not read")})
    data = json.loads(record.model_dump_json())
    for key, value in changes.items():
        target = data
        *parents, last = key.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
    path.write_text(json.dumps(data))
    return path


def test_a_prescreen_peak_of_1e_300_is_not_ready(tmp_path: Path) -> None:
    out = tmp_path / "check"
    make_result(out, "nvd", "tran", GPUS_PER_NODE="1", DP="1")
    path = _prescreen(tmp_path / "prescreen.json", **{"gemm.measured_peak_tflops": 1e-300, "warnings": []})
    check = build_check(out, "nvd", "llama", path, ("tran",))
    assert check.prescreen is None and "not plausible" in check.prescreen_reason, check.prescreen_reason
    assert check.verdict != "ready"
    assert all(row.mfu_measured is None or row.mfu_measured <= 1 for row in check.rows if hasattr(row, "mfu_measured"))


def test_an_h100_prescreen_beside_cpu_results_is_not_ready(tmp_path: Path) -> None:
    out = tmp_path / "check"
    make_result(out, "cpu", "tran", GPUS_PER_NODE="1", DP="1")
    check = build_check(out, "cpu", "llama", _prescreen(tmp_path / "prescreen.json"), ("tran",))
    assert check.prescreen is None and "platform nvd" in check.prescreen_reason, check.prescreen_reason
    assert check.verdict != "ready"


# ---------------------------------------------------------------------------
# step times bound where a foreign log or event file is read

BAD_STEP_MS = {5: "-5210.4", 6: "1e308", 7: "1e38", 8: "nan"}


def _bad_megatron_log(tmp_path: Path) -> Path:
    from tests.helpers.paths import FIXTURES

    lines = (FIXTURES / "logs" / "megatron_core012_llama.log").read_text().splitlines(keepends=True)
    out = []
    for line in lines:
        for iteration, value in BAD_STEP_MS.items():
            if f"iteration        {iteration}/" in line:
                before, _, after = line.partition("elapsed time per iteration (ms): ")
                line = before + "elapsed time per iteration (ms): " + value + " |" + after.partition(" |")[2]
        out.append(line)
    path = tmp_path / "foreign.log"
    path.write_text("".join(out))
    return path


def _bad_events(tmp_path: Path) -> Path:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    from tests.helpers.events import ARGS, START, scalar_event, text_value, write_events

    events = [Event(wall_time=START, step=0, summary=Summary(value=[text_value(k, str(v)) for k, v in ARGS.items()]))]
    bad = {5: -5.2, 6: float("inf"), 7: 1e38, 8: float("nan")}
    for i in range(1, 21):
        events.append(scalar_event(i, START + 2 * i, {"learning-rate": 1e-4, "batch-size": 128.0,
                                                      "lm loss": 11.0 - 0.1 * i, "iteration-time": bad.get(i, 2.0)}))
    return write_events(tmp_path / "tb", events)


@pytest.mark.parametrize("kind", ["megatron-log", "tensorboard"])
def test_out_of_range_step_times_are_dropped_with_a_counted_warning(tmp_path: Path, kind: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from evaluate.extract import main as extract_main

    source = _bad_megatron_log(tmp_path) if kind == "megatron-log" else _bad_events(tmp_path)
    target = tmp_path / "out" / "result.json"
    code = extract_main([str(source), "--platform", "nvd", "--framework", "mega", "--model", "llama",
                         "--output", str(target)])
    text = capsys.readouterr()
    assert code in (0, 1), text
    result = read_result(target)
    assert all(t is None or 1e-4 <= t <= 86400 for t in result.step_times), result.step_times
    assert any("dropped" in w for w in result.warnings), result.warnings
