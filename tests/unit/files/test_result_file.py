"""utils/files/result_file.py: a launched job's result file is on record from before its start, ends in one write,
and a final write that fails leaves a compact ``failed`` result or the placeholder, never a truncated file."""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest

import utils.files.result_file as result_file
from tests.helpers.evaluate import make_result
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.files.disk import OutputDirError
from utils.files.locks import locked_by, result_lock_path
from utils.files.result_file import (
    PLACEHOLDER_REASON,
    JobExit,
    JobFacts,
    ResultFile,
    ended_result,
    failure_result,
    reserve_bytes,
)
from utils.result.file import read_result, result_path
from utils.result.step_log import step_log_path
from utils.schema.model import result_bytes


def facts(tmp_path: Path, **overrides: str) -> JobFacts:
    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path),
                               "DP": "1", "GPUS_PER_NODE": "1", **overrides})
    return JobFacts(cfg, "cpu", "tran", "llama", None, "identical", None, tmp_path / "logs" / "job.log")


def started(tmp_path: Path) -> ResultFile:
    job = facts(tmp_path)
    file = ResultFile(result_path(job.cfg.output_dir, "cpu", "tran", "llama"), job)
    file.start()
    return file


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failure_result_names_the_job_its_profile_and_its_log_only_when_asked(tmp_path: Path) -> None:
    job = facts(tmp_path)
    result = failure_result(job, "failed", "the job did not start")
    assert (result.status, result.platform, result.framework, result.model) == ("failed", "cpu", "tran", "llama")
    assert result.error.startswith("the job did not start") and result.profile == "identical"
    assert result.source.log_path is None
    assert failure_result(job, "incomplete", "stopped", from_log=True).source.log_path == str(job.log_path)


def test_a_job_that_exited_without_a_result_is_failed_with_its_exit_code_and_log_tail(tmp_path: Path) -> None:
    job = facts(tmp_path)
    job.log_path.parent.mkdir(parents=True)
    job.log_path.write_text("starting\nTraceback: it broke\n")
    result = ended_result(job, JobExit(None, 1))
    assert result.status == "failed" and result.error.startswith("exit code 1 and no result was produced; log tail:\n")
    assert "Traceback: it broke" in result.error and result.source.log_path == str(job.log_path)
    stopped = ended_result(job, JobExit(None, 128 + signal.SIGTERM))
    assert stopped.status == "incomplete" and stopped.error.startswith("interrupted (exit code")
    named = ended_result(job, JobExit(None, 1, "SIGINT"))
    assert named.status == "incomplete" and named.error.startswith("interrupted by SIGINT (exit code 1")


def test_an_own_result_stands_unless_its_process_failed_after_reporting_success(tmp_path: Path) -> None:
    job = facts(tmp_path)
    own = failure_result(job, "incomplete", "stopped early")
    assert ended_result(job, JobExit(own, 1)) is own and own.status == "incomplete"
    ok = read_result(make_result(tmp_path / "own", "cpu", "tran"))
    assert ok.status == "ok"
    assert ended_result(job, JobExit(ok, 0)).status == "ok"
    failed = ended_result(job, JobExit(ok, 2))
    assert failed is ok and failed.status == "failed"
    assert failed.error.startswith("process exited with code 2 after reporting success")


def test_the_launchers_verdict_is_a_failure_result(tmp_path: Path) -> None:
    result = ended_result(facts(tmp_path), ("failed", "memory check: does not fit", False))
    assert result.status == "failed" and result.error.startswith("memory check: does not fit")
    assert result.source.log_path is None


def test_start_reserves_room_writes_the_placeholder_and_drops_old_steps(tmp_path: Path) -> None:
    job = facts(tmp_path)
    path = result_path(job.cfg.output_dir, "cpu", "tran", "llama")
    path.write_text('{"status": "ok", "older": true}')
    step_log_path(path).write_text("an older run's steps\n")
    file = ResultFile(path, job)
    file.start()
    placeholder = read_result(path)
    assert placeholder.status == "incomplete" and placeholder.error.startswith(PLACEHOLDER_REASON)
    assert file.reserve.stat().st_size == reserve_bytes(job.cfg) >= result_bytes(job.cfg.train_iters)
    assert not step_log_path(path).exists()
    assert file.is_placeholder()
    path.write_text(path.read_text())  # the job's own write replaces it
    assert not file.is_placeholder()


def test_on_record_holds_the_results_lock_for_the_block(tmp_path: Path) -> None:
    job = facts(tmp_path)
    file = ResultFile(result_path(job.cfg.output_dir, "cpu", "tran", "llama"), job)
    lock = result_lock_path(file.path)
    with file.on_record():
        assert file.is_placeholder()
        assert f"pid {os.getpid()}" in (locked_by(lock) or ""), "a second launcher is refused naming this one"
    assert locked_by(lock) is None and file.is_placeholder(), "released after the block, the placeholder kept"


def test_start_refuses_in_one_line_when_the_placeholder_cannot_be_written(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    job = facts(tmp_path)
    path = result_path(job.cfg.output_dir, "cpu", "tran", "llama")
    path.write_text('{"status": "ok", "older": true}')
    monkeypatch.setattr(result_file, "write_result", _enospc)
    file = ResultFile(path, job)
    with pytest.raises(OutputDirError, match=r"^cannot write the result .*No space left on device$"):
        file.start()
    assert not path.exists() and not file.reserve.exists(), "no older result passing for this run's, no reserve"


def test_finish_applies_the_updates_in_one_step_and_releases_the_room(tmp_path: Path) -> None:
    file = started(tmp_path)
    result = failure_result(file.job, "failed", "refused")
    assert file.finish(result, {"status": "incomplete", "error": "interrupted by SIGTERM: refused"}) is None
    written = json.loads(file.path.read_text())
    assert (written["status"], written["error"]) == ("incomplete", "interrupted by SIGTERM: refused")
    assert not file.reserve.exists() and not file.is_placeholder()


def test_an_update_the_schema_refuses_changes_and_writes_nothing(tmp_path: Path) -> None:
    file = started(tmp_path)
    result = failure_result(file.job, "failed", "refused")
    with pytest.raises(ValueError, match="unknown field"):
        file.finish(result, {"no_such_field": 1})
    assert file.is_placeholder() and file.reserve.exists()


def test_a_failed_final_write_leaves_a_compact_failed_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = started(tmp_path)
    real = result_file.write_result
    monkeypatch.setattr(result_file, "write_result",
                        lambda path, result: _enospc() if result.status == "incomplete" else real(path, result))
    problem = file.finish(failure_result(file.job, "incomplete", "stopped"), {})
    assert problem is not None and problem.endswith("wrote a failed result without the per-step arrays instead")
    compact = read_result(file.path)
    assert compact.status == "failed" and "No space left on device" in compact.error
    assert compact.source.log_path == str(file.job.log_path)


def test_when_no_final_write_succeeds_the_placeholder_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = started(tmp_path)
    monkeypatch.setattr(result_file, "write_result", _enospc)
    problem = file.finish(failure_result(file.job, "failed", "refused"), {})
    assert problem is not None and problem.endswith("the placeholder (incomplete) stays")
    assert read_result(file.path).error.startswith(PLACEHOLDER_REASON)
