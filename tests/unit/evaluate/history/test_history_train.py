"""Done when: a quick benchmark run twice leaves two runs in the SQLite database; trend and diff show them; the
gate passes the second against the first and fails a candidate forged 10% slower or with a diverging loss.

Trains (tiny Llama with ``tran``, twice, through ``shell/train.sh``): marked slow. On this shared 2-core machine
the step time of a 12-step tiny run moves by tens of percent between two runs, so the real pair is gated with
a throughput threshold of 50% (the 5% rule itself is exercised by the forged candidate, whose throughput is set
10% below the first run's, and in test_gate_rules.py).

The two runs go through ``shell/train.sh`` as a user starts them (it adds each result to the database), in a copy
of the checkout without the comparison (``tests/helpers/shell.py: without_comparison``): train.sh runs it after the
add, nothing here reads it, and it cost two interpreters that import the evaluate stack per run (about 7 CPU s). The
queries and the gate then run in this process (``tests/helpers/history.py: cli``, the same ``main`` with the same
arguments and environment), which spares six more.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.history import cli
from tests.helpers.paths import REPO
from tests.helpers.shell import copy_repo, without_comparison

pytestmark = pytest.mark.slow


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_two_quick_runs_are_remembered_and_gated(tiny_env: Callable[..., dict[str, str]], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    env = tiny_env(FRAMEWORK="tran", MODELS="llama")
    db = env["HISTORY_DB"]
    output = Path(env["OUTPUT_DIR"])
    checkout = without_comparison(copy_repo(tmp_path / "repo"))
    for _ in range(2):
        proc = _run(["bash", str(checkout / "shell" / "train.sh")], env, checkout)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "history:" not in proc.stderr, proc.stderr
    for key, value in env.items():  # what the commands below read (HISTORY_DB, OUTPUT_DIR), as train.sh had it
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO)

    def history(*args: str) -> subprocess.CompletedProcess:
        return cli(capsys, *args)

    def gate(*args: str) -> subprocess.CompletedProcess:
        return cli(capsys, "--db", db, *args, module="evaluate.gate")

    listed = json.loads(history("list", "--json").stdout)
    assert [(r["id"], r["platform"], r["framework"], r["status"]) for r in listed] == [
        (1, "cpu", "tran", "ok"), (2, "cpu", "tran", "ok")]

    trend = history("trend")
    assert trend.returncode == 0 and "cpu/tran/llama" in trend.stdout and "2 run(s)" in trend.stdout, trend.stderr
    assert " #1 " in trend.stdout and " #2 " in trend.stdout
    assert (output / "history_trend.png").stat().st_size > 0
    diff = history("diff", "1", "2")
    assert diff.returncode == 0 and "tokens/s/GPU" in diff.stdout and "B vs A" in diff.stdout, diff.stderr

    passed = gate("--candidate-runs", "2", "--baseline", "1", "--throughput-threshold", "0.5")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "PASS loss correlation" in passed.stdout

    second = json.loads((output / "train_cpu_tran_llama.json").read_text())
    first_tps = listed[0]["tokens_per_second_per_gpu"]
    slower = json.loads(json.dumps(second))
    slower["performance_metrics"]["tokens_per_second_per_gpu"] = first_tps / 1.10
    (tmp_path / "slower").mkdir()
    (tmp_path / "slower" / "train_cpu_tran_llama.json").write_text(json.dumps(slower))
    failed = gate("--candidate", str(tmp_path / "slower"), "--baseline", "1")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL tokens_per_second_per_gpu" in failed.stdout and "-9.1%, threshold -5.0%" in failed.stdout

    diverging = json.loads(json.dumps(second))
    losses = diverging["loss_values"]
    diverging["loss_values"] = [v * (1 + 0.6 * i / len(losses)) for i, v in enumerate(losses)]
    (tmp_path / "diverging").mkdir()
    (tmp_path / "diverging" / "train_cpu_tran_llama.json").write_text(json.dumps(diverging))
    failed = gate("--candidate", str(tmp_path / "diverging"), "--baseline", "1", "--throughput-threshold", "0.5")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL loss per-step" in failed.stdout or "FAIL final loss" in failed.stdout
