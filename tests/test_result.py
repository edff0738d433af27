"""utils/result.py: schema round-trip, rejection of broken files, atomic writes, the run guard."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from utils.configure import REPO_ROOT, load_config
from utils.hardware import collect_gpu_info
from utils.models import get_shape
from utils.monitor import fill_result
from utils.result import (
    Interrupted,
    ResultError,
    finalize_result,
    main,
    new_result,
    read_result,
    result_guard,
    result_path,
    status_of,
    write_result,
)

ENV = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "TRAIN_ITERS": "10", "WARMUP_STEPS": "2"}


def make_result(steps: int = 10) -> dict:
    cfg = load_config(environ=ENV)
    shape = get_shape("llama", "full")
    result = new_result(cfg, platform="cpu", framework="tran", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source_kind="callback")
    arrays = {
        "step_times": [2.0, 1.5] + [1.0] * (steps - 2),
        "loss_values": [10.0 - 0.5 * i for i in range(steps)],
        "learning_rates": [1e-4] * steps,
        "memory_allocated_gb": [None] * steps,
    }
    fill_result(result, arrays, skip_steps=cfg.skip_steps, global_batch_size=cfg.gbs, seq_len=cfg.sl,
                world_size=cfg.world_size, shape=shape)
    return finalize_result(result, "ok", None)


def test_round_trip(tmp_path):
    path = write_result(tmp_path / "train_cpu_tran_llama.json", make_result())
    data = read_result(path)
    assert data["status"] == "ok" and data["schema_version"] == 1
    perf = data["performance_metrics"]
    assert perf["measured_steps"] == 8 and perf["skipped_steps"] == 2
    assert perf["median_step_time_seconds"] == 1.0
    assert perf["tokens_per_second"] == 64 * 2048  # GBS*SL / median step time
    assert perf["tokens_per_second_per_gpu"] == 64 * 2048 / 8
    assert perf["mfu"] is None and "MFU not computed" in perf["mfu_reason"]
    assert data["training_config"]["global_batch_size"] == 64 and data["training_config"]["GBS"] == 64
    assert not list(tmp_path.glob(".*tmp"))  # no temp file left behind


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda r: r.pop("step_times"), "'step_times' is a required property"),
        (lambda r: r.update(status="great"), "status"),
        (lambda r: r.update(schema_version=2), "schema_version"),
        (lambda r: r.update(framework="jax"), "framework"),
        (lambda r: r.update(error="boom"), "error"),  # ok with an error
        (lambda r: r.update(status="failed", error=None), "error"),  # failed without a reason
        (lambda r: r["step_times"].__setitem__(0, -1.0), "step_times/0"),
        (lambda r: r["training_config"].pop("SL"), "'SL' is a required property"),
    ],
)
def test_broken_results_are_rejected_with_the_first_problem(tmp_path, mutate, problem):
    result = make_result()
    mutate(result)
    with pytest.raises(ResultError, match=r"train_x\.json") as excinfo:
        write_result(tmp_path / "train_x.json", result)
    assert problem in str(excinfo.value)
    assert not (tmp_path / "train_x.json").exists()


def test_truncated_and_non_json_files(tmp_path):
    good = write_result(tmp_path / "a.json", make_result())
    truncated = tmp_path / "b.json"
    truncated.write_text(good.read_text()[:200])
    with pytest.raises(ResultError, match="not valid JSON"):
        read_result(truncated)
    with pytest.raises(ResultError, match="no such file"):
        read_result(tmp_path / "absent.json")
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
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_result_path_naming():
    assert result_path(Path("out"), "amd", "prim", "qwen") == Path("out/train_amd_prim_qwen.json")
    assert result_path(Path("out"), "nvd", "mega", "llama", 3) == Path("out/train_nvd_mega_llama_r3.json")


def test_nan_is_not_written_as_json_nan(tmp_path):
    result = make_result()
    result["loss_values"][3] = float("nan")
    with pytest.raises(ValueError):
        write_result(tmp_path / "nan.json", result)


def guarded(tmp_path, body, expected=5):
    cfg = load_config(environ=ENV)
    shape = get_shape("llama", "full")
    result = new_result(cfg, platform="cpu", framework="tran", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source_kind="callback")
    times: list[float] = []

    def fill(res):
        fill_result(res, {"step_times": times, "loss_values": [1.0] * len(times),
                          "learning_rates": [1e-4] * len(times), "memory_allocated_gb": [None] * len(times)},
                    skip_steps=1, global_batch_size=cfg.gbs, seq_len=cfg.sl, world_size=8, shape=shape)

    path = tmp_path / "guarded.json"
    with result_guard(path, result, fill, expected):
        body(times)
    return read_result(path)


def test_guard_ok_and_short_run(tmp_path):
    assert guarded(tmp_path, lambda t: t.extend([1.0] * 5))["status"] == "ok"
    short = guarded(tmp_path, lambda t: t.extend([1.0] * 3))
    assert short["status"] == "incomplete" and short["error"] == "only 3 of 5 steps ran"


def test_guard_exception_writes_failed_with_steps_done(tmp_path):
    def body(times):
        times.extend([1.0, 1.0])
        raise RuntimeError("CUDA out of memory")

    with pytest.raises(RuntimeError):
        guarded(tmp_path, body)
    data = read_result(tmp_path / "guarded.json")
    assert data["status"] == "failed"
    assert data["error"] == "RuntimeError: CUDA out of memory (2 of 5 steps done)"
    assert data["step_times"] == [1.0, 1.0]


def test_guard_sigterm_writes_incomplete(tmp_path):
    def body(times):
        times.append(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Interrupted):
        guarded(tmp_path, body)
    data = read_result(tmp_path / "guarded.json")
    assert data["status"] == "incomplete" and "interrupted by SIGTERM" in data["error"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored


def test_cli_status_and_check(tmp_path, capsys):
    good = write_result(tmp_path / "good.json", make_result())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"status": "ok"}))
    assert main(["status", str(good)]) == 0 and capsys.readouterr().out.strip() == "ok"
    assert main(["check", str(good), str(bad)]) == 1
    assert "bad.json" in capsys.readouterr().err
