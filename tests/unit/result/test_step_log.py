"""utils/result/step_log.py: the per-step record a killed run leaves, and the result recovered from it."""

from __future__ import annotations

import json
from pathlib import Path

from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.machine.hardware import collect_gpu_info
from utils.result.file import new_result, result_path
from utils.result.step_log import StepLog, read_step_log, recover_result, step_log_path
from utils.schema.measures import Source
from utils.spec.models import get_shape


def _started(tmp_path: Path):
    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path),
                               "TRAIN_ITERS": "10", "WARMUP_STEPS": "1", "MEASURE_SKIP_STEPS": "2", "DP": "1",
                               "GPUS_PER_NODE": "1"})
    result = new_result(cfg, platform="cpu", framework="tran", model="llama", shape=get_shape("llama", "tiny"),
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    return cfg, result


def test_every_step_is_on_disk_as_soon_as_it_ends(tmp_path: Path) -> None:
    _, result = _started(tmp_path)
    path = step_log_path(result_path(tmp_path, "cpu", "tran", "llama"))
    assert path.name == "train_cpu_tran_llama.steps.jsonl"
    log = StepLog(path, result, skip_steps=2, world_size=1)
    for step in range(1, 4):
        log.append(step, 0.5 + step, 3.0 - step / 10, 1e-3, None)
        assert len(path.read_text().splitlines()) == 1 + step, "flushed before append returns"
    log.append(4, 0.5, float("nan"), 1e-3)  # a non-finite loss is recorded as null, never as NaN
    log.close()
    header, arrays = read_step_log(path)
    assert header["skip_steps"] == 2 and header["world_size"] == 1
    assert arrays["step_times"] == [1.5, 2.5, 3.5, 0.5] and arrays["loss_values"][3] is None


def test_a_killed_run_becomes_an_incomplete_result_with_its_steps(tmp_path: Path) -> None:
    _, result = _started(tmp_path)
    path = tmp_path / "train_cpu_tran_llama.steps.jsonl"
    log = StepLog(path, result, skip_steps=2, world_size=1)
    for step in range(1, 6):
        log.append(step, 1.0, 2.0, 1e-3)
    log.close()
    with path.open("a") as stream:
        stream.write('{"step": 6, "time_s": 1.')  # killed in the middle of a line
    recovered = recover_result(path, "the trainer ended (exit code -9) without writing its result")
    assert recovered.status == "incomplete"
    assert recovered.error == "the trainer ended (exit code -9) without writing its result (5 of 10 steps done)"
    assert len(recovered.step_times) == 5 and recovered.performance_metrics.measured_steps == 3
    assert recovered.performance_metrics.tokens_per_second > 0
    assert recovered.power_metrics.reason and recovered.finished_at
    assert recovered.source.files[-1].path == str(path) and recovered.source.files[-1].sha256


def test_no_header_means_nothing_to_recover(tmp_path: Path) -> None:
    path = tmp_path / "x.steps.jsonl"
    assert recover_result(path, "gone") is None  # missing
    path.write_text('{"step": 1, "time_s": 1.0}\n')
    assert recover_result(path, "gone") is None  # no header
    path.write_text(json.dumps({"header": {"result": {"status": "ok"}}}) + "\n")
    assert recover_result(path, "gone") is None  # a header that is no result
