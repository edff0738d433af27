"""utils/result/file.py: the typed result round-trip, rejection of broken files, atomic writes, the run guard."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.machine.hardware import collect_gpu_info
from utils.result.file import (
    Interrupted,
    ResultError,
    finalize_result,
    main,
    new_result,
    read_result,
    result_guard,
    result_path,
    schema_text,
    status_of,
    training_config,
    update_result,
    write_result,
)
from utils.result.step_log import record_steps
from utils.schema.measures import Source
from utils.schema.model import SCHEMA_PATH, Result
from utils.spec.models import get_shape

ENV = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "TRAIN_ITERS": "10", "WARMUP_STEPS": "2"}


def started() -> Result:
    cfg = load_config(environ=ENV)
    return new_result(cfg, platform="cpu", framework="tran", model="llama", shape=get_shape("llama", "full"),
                      gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))


def make_result(steps: int = 10) -> Result:
    result = started()
    arrays = {
        "step_times": [2.0, 1.5] + [1.0] * (steps - 2),
        "loss_values": [10.0 - 0.5 * i for i in range(steps)],
        "learning_rates": [1e-4] * steps,
        "memory_allocated_gb": [None] * steps,
    }
    record_steps(result, arrays, skip_steps=load_config(environ=ENV).skip_steps, shape=get_shape("llama", "full"))
    return finalize_result(result, "ok", None)


def test_round_trip(tmp_path):
    path = write_result(tmp_path / "train_cpu_tran_llama.json", make_result())
    data = read_result(path)
    assert isinstance(data, Result) and data.status == "ok" and data.schema_version == 2
    perf = data.performance_metrics
    assert perf.measured_steps == 8 and perf.skipped_steps == 2
    assert perf.median_step_time_seconds == 1.0
    assert perf.tokens_per_second == 64 * 2048  # GBS*SL / median step time
    assert perf.tokens_per_second_per_gpu == 64 * 2048 / 8
    assert perf.total_time_seconds == 2.0 + 1.5 + 8 * 1.0  # every recorded step, warm-up included
    assert perf.mfu is None and "MFU not computed" in perf.mfu_reason
    assert data.training_config.global_batch_size == 64 and data.training_config.workload.GBS == 64
    assert data == make_result().model_copy(update={"started_at": data.started_at, "finished_at": data.finished_at})
    assert not list(tmp_path.glob(".*tmp*"))  # no temp file left behind


def test_training_config_spells_the_seed_names_from_the_workload():
    cfg = load_config(environ={**ENV, "MBS": "2", "GA": "4", "SL": "1024"})
    config = training_config(cfg, "bf16")
    assert (config.max_steps, config.global_batch_size, config.micro_batch_size, config.sequence_length,
            config.num_gpus) == (10, cfg.gbs, 2, 1024, cfg.world_size)
    assert config.workload.model_dump(exclude={"unknown"}) == cfg.workload()


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda r: r.pop("step_times"), "step_times"),  # its length no longer matches the loss array
        (lambda r: r.update(status="great"), "status"),
        (lambda r: r.update(schema_version=3), "schema_version"),
        (lambda r: r.update(error="boom"), "status ok cannot carry an error"),
        (lambda r: r.update(status="failed", error=None), "needs an error"),
        (lambda r: r["step_times"].__setitem__(0, -1.0), "step_times/0"),
        (lambda r: r["training_config"]["workload"].pop("SL"), "SL"),
        (lambda r: r.update(surprise=1), "surprise"),
        (lambda r: r["performance_metrics"].update(tokens_per_second=-5.0), "performance_metrics/tokens_per_second"),
    ],
)
def test_broken_results_are_rejected_with_the_first_problem(tmp_path, mutate, problem):
    data = make_result().model_dump(mode="json")
    mutate(data)
    path = tmp_path / "train_x.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultError, match=r"train_x\.json") as excinfo:
        read_result(path)
    assert problem in str(excinfo.value)
    assert status_of(path) == "invalid"


def test_a_result_changed_in_place_is_validated_again_on_write(tmp_path):
    result = make_result()
    result.loss_values[3] = float("nan")  # a list mutation: no assignment to validate
    with pytest.raises(ResultError, match="loss_values/3"):
        write_result(tmp_path / "nan.json", result)
    assert not (tmp_path / "nan.json").exists()
    with pytest.raises(ResultError, match="same length"):
        update_result(make_result(), step_times=[1.0])  # arrays change together, or not at all


def test_truncated_and_non_json_files(tmp_path):
    good = write_result(tmp_path / "a.json", make_result())
    truncated = tmp_path / "b.json"
    truncated.write_text(good.read_text()[:200])
    with pytest.raises(ResultError, match="not valid JSON"):
        read_result(truncated)
    with pytest.raises(ResultError, match="no such file"):
        read_result(tmp_path / "absent.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ResultError, match="a JSON object"):
        read_result(tmp_path / "list.json")
    assert status_of(truncated) == "invalid" and status_of(tmp_path / "absent.json") == "missing"
    assert status_of(good) == "ok"


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = write_result(tmp_path / "r.json", make_result())
    before = path.read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_result(path, make_result())
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name != ".tprimat"] == ["r.json"]  # .tprimat: the marker


def test_result_path_naming():
    assert result_path(Path("out"), "amd", "prim", "qwen") == Path("out/train_amd_prim_qwen.json")
    assert result_path(Path("out"), "nvd", "mega", "llama", 3) == Path("out/train_nvd_mega_llama_r3.json")


def test_a_new_result_is_valid_and_incomplete_until_finalized():
    result = started()
    assert result.status == "incomplete" and result.error == "run started but did not finish"
    assert result.finished_at is None and result.started_at
    with pytest.raises(ValueError, match="allowed values"):
        finalize_result(result, "great", None)
    finalize_result(result, "failed", "RuntimeError: boom")
    assert result.error == "RuntimeError: boom (0 of 10 steps done)" and result.finished_at
    short = started()
    record_steps(short, {"step_times": [1.0] * 3, "loss_values": [1.0] * 3, "learning_rates": [0.1] * 3},
                 skip_steps=2, shape=get_shape("llama"))
    assert finalize_result(short, "ok", None).status == "incomplete" and short.error == "only 3 of 10 steps ran"


def guarded(tmp_path, body, expected=5):
    result = started()
    times: list[float] = []

    def fill(res):
        record_steps(res, {"step_times": times, "loss_values": [1.0] * len(times),
                           "learning_rates": [1e-4] * len(times), "memory_allocated_gb": [None] * len(times)},
                     skip_steps=1, shape=get_shape("llama", "full"), world_size=8)

    path = tmp_path / "guarded.json"
    with result_guard(path, result, fill, expected):
        body(times)
    return read_result(path)


def test_guard_ok_and_short_run(tmp_path):
    assert guarded(tmp_path, lambda t: t.extend([1.0] * 5)).status == "ok"
    short = guarded(tmp_path, lambda t: t.extend([1.0] * 3))
    assert short.status == "incomplete" and short.error == "only 3 of 5 steps ran"


def test_guard_exception_writes_failed_with_steps_done(tmp_path):
    def body(times):
        times.extend([1.0, 1.0])
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError):
        guarded(tmp_path, body)
    data = read_result(tmp_path / "guarded.json")
    assert data.status == "failed"
    assert data.error == "RuntimeError: CUDA out of memory (2 of 5 steps done)"
    assert data.step_times == [1.0, 1.0]


def test_guard_sigterm_writes_incomplete(tmp_path):
    def body(times):
        times.append(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Interrupted):
        guarded(tmp_path, body)
    data = read_result(tmp_path / "guarded.json")
    assert data.status == "incomplete" and "interrupted by SIGTERM" in data.error
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored


def test_cli_status_and_check(tmp_path, capsys):
    good = write_result(tmp_path / "good.json", make_result())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"status": "ok"}))
    assert main(["status", str(good)]) == 0 and capsys.readouterr().out.strip() == "ok"
    assert main(["check", str(good), str(bad)]) == 1
    assert "bad.json" in capsys.readouterr().err


def test_committed_schema_is_generated_from_the_model(capsys):
    """utils/schema/schema.json is regenerated (python -m utils.result.file schema --write) when the model changes."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "utils/schema/schema.json is stale: run python -m utils.result.file schema --write")
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$id"] == "tprimat/result/v2" and "performance_metrics" in schema["properties"]


def test_a_written_result_validates_against_the_generated_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    path = write_result(tmp_path / "r.json", make_result())
    jsonschema.Draft202012Validator(json.loads(schema_text())).validate(json.loads(path.read_text()))
