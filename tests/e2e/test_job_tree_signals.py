"""Signals reach the whole job tree, and a killed trainer keeps what it measured (real process trees, cpu).

* SIGTERM to shell/train.sh: its job's launcher, torchrun and trainer stop, the job is recorded incomplete
  with the signal, no further job starts, train.sh exits 143.
* SIGINT to shell/quickstart.sh while shell/data.sh runs a stage: the stage stops and removes its partial
  output, no later stage or step starts, exit 130.
* SIGKILL of rank 0 (no chance to write): the launcher turns its per-step record into an incomplete result.
* Every script here starts with SIGINT and SIGHUP at their default, even when the suite runs with them ignored
  (``cmd &``, ``nohup``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import (
    all_gone,
    command_line,
    descendants,
    ignored_signals,
    kill_tree,
    signals_at_default,
    wait_for,
)
from tests.helpers.shell import clean_env
from utils.result.file import read_result

LONG = {"TRAIN_ITERS": "2000", "MEASURE_SKIP_STEPS": "1", "GA": "1"}


def _start(argv: list[str], env: dict[str, str], log: Path, cwd: Path = REPO) -> subprocess.Popen:
    """Start ``argv`` with SIGINT and SIGHUP at their default, however the suite was started (tests/helpers/proc.py)."""
    with log.open("w") as sink, signals_at_default(signal.SIGINT, signal.SIGHUP):
        return subprocess.Popen(argv, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT (cmd &)", "SIGHUP (nohup)"])
def test_a_started_process_sees_the_signal_even_when_the_suite_ignores_it(tmp_path: Path, signum: int) -> None:
    previous = signal.signal(signum, signal.SIG_IGN)  # as in a suite started by `./shell/test.sh &` or nohup
    try:
        proc = _start(["sleep", "30"], dict(os.environ), tmp_path / "sleep.log")
    finally:
        signal.signal(signum, previous)
    try:
        assert signum not in ignored_signals(proc.pid)
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == -signum
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)


@pytest.mark.slow
def test_sigkill_of_rank_0_keeps_every_measured_step(tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    env = tiny_env(**LONG)
    log = tmp_path / "launcher.log"
    proc = _start([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                   "--model", "llama"], env, log)
    try:
        wait_for(lambda: "step 6/2000" in log.read_text() or proc.poll() is not None, 240, "step 6")
        assert proc.poll() is None, log.read_text()[-3000:]
        (rank0,) = [p for p in descendants(proc.pid)  # the worker, not torchrun (whose argv names it too)
                    if "-m train.tran.worker" in command_line(p) and "torch.distributed.run" not in command_line(p)]
        os.kill(rank0, signal.SIGKILL)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    text = log.read_text()
    assert code == 1, text[-3000:]
    result = read_result(Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json")
    assert result.status == "incomplete", result.error
    assert "without writing its result" in result.error
    done = len(result.step_times)
    assert done >= 6 and f"{done} of 2000 steps done" in result.error
    assert all(isinstance(v, float) for v in result.loss_values)
    assert result.performance_metrics.measured_steps == done - 1 and result.performance_metrics.tokens_per_second
    assert any(f.path.endswith("train_cpu_tran_llama.steps.jsonl") for f in result.source.files)
    assert any("recovered from" in w for w in result.warnings)


@pytest.mark.slow
def test_sigterm_to_train_sh_stops_the_job_tree_and_the_remaining_jobs(
        tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    env = tiny_env(**LONG, MODELS="llama qwen")
    out = Path(env["OUTPUT_DIR"])
    log = tmp_path / "train.log"
    proc = _start(["bash", str(REPO / "shell" / "train.sh")], env, log)
    try:
        wait_for(lambda: "step 3/2000" in log.read_text() or proc.poll() is not None, 240, "step 3")
        assert proc.poll() is None, log.read_text()[-3000:]
        tree = descendants(proc.pid)
        assert any("-m train.tran.worker" in command_line(p) for p in tree)
        proc.send_signal(signal.SIGTERM)  # to train.sh only, as `kill <pid>` does
        code = proc.wait(timeout=180)
        assert all_gone(tree), [command_line(p) for p in tree if p in descendants(1)]
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    text = log.read_text()
    assert code == 143, text[-3000:]
    result = read_result(out / "train_cpu_tran_llama.json")
    assert result.status == "incomplete" and "SIGTERM" in result.error
    assert 3 <= len(result.step_times) < 2000
    assert not (out / "train_cpu_tran_qwen.json").exists(), "the next job never started"
    assert "1 job(s) not started" in text and "train.tran.worker --model qwen" not in text
    assert "skipping the comparison" in text


def _sigint_to_quickstart(repo: Path, env: dict[str, str], log: Path, timeout: float, what: str,
                          ready: Callable[[subprocess.Popen], bool]) -> tuple[int, str]:
    """shell/quickstart.sh (its set-up a stand-in: the shared .venv) until ``ready``, then SIGINT: its exit code and
    log, every process it had started gone."""
    (repo / "shell" / "setup.sh").write_text("#!/usr/bin/env bash\necho 'setup: stand-in (the shared .venv)'\n")
    proc = _start(["bash", str(repo / "shell" / "quickstart.sh")], env, log, cwd=repo)
    try:
        wait_for(lambda: ready(proc) or proc.poll() is not None, timeout, what)
        assert proc.poll() is None, log.read_text()
        tree = descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        assert all_gone(tree), [command_line(p) for p in tree]
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
    return code, log.read_text()


@pytest.mark.slow
def test_sigint_to_quickstart_stops_the_data_stage_and_every_later_step(repo: Path, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    env = clean_env(tmp_path, DATA_DIR=str(data), OUTPUT_DIR=str(out), SAMPLE_MB="20", MODELS="llama")
    # Mid-write: the corpus's temporary file exists (utils/io/atomic.py), so data.fetch is past its imports
    # and has its handler. A fixed pause after the process appeared was too short with two suites on two
    # cores: the signal landed in its imports, and Python printed a traceback.
    code, text = _sigint_to_quickstart(
        repo, env, tmp_path / "quickstart.log", 120, "data.fetch to start writing the corpus",
        lambda proc: bool(list((data / "sample").glob(".raw.jsonl.tmp-*"))))
    assert code == 130, text
    assert "data.fetch: interrupted by SIGINT" in text and "stopped by SIGINT" in text
    assert "== data.clean ==" not in text and "quickstart: training" not in text
    assert not list((data / "sample").glob("*raw.jsonl*")), "no partial corpus left"
    assert (data / ".tprimat" / "data.lock").read_text() == "", "the lock was released"


@pytest.mark.slow
def test_sigint_to_quickstart_during_its_dry_runs_stops_them_and_starts_no_job(
        repo: Path, tiny_env: Callable[..., dict[str, str]], tmp_path: Path) -> None:
    """The dry runs that store each model's sample digest (shell/quickstart.sh) run side by side, in the background:
    a signal stops them too, and no job starts."""
    env = tiny_env(MODELS="llama qwen")  # the data is this worker's built copy: data.sh finds it ready
    code, text = _sigint_to_quickstart(
        repo, env, tmp_path / "quickstart.log", 240, "both dry runs",
        lambda proc: sum("--dry-run" in command_line(p) for p in descendants(proc.pid)) == 2)
    assert code == 130, text
    assert "quickstart: stopped by SIGINT" in text and "quickstart: training" not in text
    assert not list(Path(env["OUTPUT_DIR"]).glob("train_cpu_*.json")), "no job started"
