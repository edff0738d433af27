"""train/launch.py: the shared launcher guarantees a result, whatever the job does."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from train.launch import LaunchPlan, RunContext, launch, log_path_for, torchrun_argv, writes_result
from utils.configure import REPO_ROOT, load_config
from utils.result import read_result, result_path


def context(tmp_path: Path, **overrides: str) -> RunContext:
    env = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path), "DP": "1",
           "GPUS_PER_NODE": "1", **overrides}
    cfg = load_config(environ=env)
    return RunContext(cfg=cfg, platform="cpu", framework="tran", model="llama", run_index=None,
                      result_path=result_path(cfg.output_dir, "cpu", "tran", "llama"),
                      log_path=log_path_for(cfg, "cpu", "tran", "llama", None))


def plugin(script: str, collect=lambda ctx, plan, rc: None, files=None, result_node="first"):
    """A stand-in framework whose command is a Python one-liner."""
    return SimpleNamespace(
        plan=lambda ctx: LaunchPlan(argv=[sys.executable, "-c", script], env={"TPRIMAT_TEST_VAR": "1"},
                                    files=files or {}),
        collect=collect,
        RESULT_NODE=result_node,
    )


def test_dry_run_prints_command_env_and_files_and_runs_nothing(tmp_path, capsys):
    ctx = context(tmp_path)
    generated = tmp_path / "gen" / "exp.yaml"
    assert launch(ctx, plugin("raise SystemExit(3)", files={generated: "a: 1\n"}), dry_run=True) == 0
    out = capsys.readouterr().out
    assert "# command" in out and "raise SystemExit(3)" in out
    assert "TPRIMAT_TEST_VAR=1" in out and f"# generated file: {generated}" in out and "a: 1" in out
    assert not generated.exists() and not ctx.result_path.exists() and not ctx.log_path.exists()


def test_crash_without_result_becomes_failed_with_log_tail(tmp_path):
    ctx = context(tmp_path)
    ctx.result_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.result_path.write_text("{stale}")
    code = launch(ctx, plugin("print('RuntimeError: CUDA out of memory'); raise SystemExit(3)"))
    assert code == 1
    result = read_result(ctx.result_path)
    assert result["status"] == "failed"
    assert "exit code 3" in result["error"] and "CUDA out of memory" in result["error"]
    assert "CUDA out of memory" in ctx.log_path.read_text()


def test_generated_files_are_written_before_the_command_runs(tmp_path):
    ctx = context(tmp_path)
    generated = tmp_path / "gen" / "exp.yaml"
    script = f"import pathlib,sys; sys.exit(0 if pathlib.Path({str(generated)!r}).read_text() == 'a: 1\\n' else 4)"
    seen = {}

    def collect(ctx, plan, rc):
        seen["rc"] = rc

    launch(ctx, plugin(script, collect=collect, files={generated: "a: 1\n"}))
    assert seen["rc"] == 0


def test_signal_death_is_incomplete(tmp_path):
    ctx = context(tmp_path)
    launch(ctx, plugin("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    result = read_result(ctx.result_path)
    assert result["status"] == "incomplete" and "interrupted" in result["error"]


def test_success_claimed_with_non_zero_exit_is_failed(tmp_path):
    ctx = context(tmp_path)

    def collect(ctx, plan, rc):
        from train.launch import failure_result
        from utils.result import finalize_result

        result = failure_result(ctx, "failed", "placeholder")
        result.update(status="ok", error=None)
        return finalize_result(result, "ok", None)

    assert launch(ctx, plugin("raise SystemExit(5)", collect=collect)) == 1
    result = read_result(ctx.result_path)
    assert result["status"] == "failed" and "exited with code 5 after reporting success" in result["error"]


def test_collector_bug_still_leaves_a_result(tmp_path):
    ctx = context(tmp_path)

    def collect(ctx, plan, rc):
        raise KeyError("iteration")

    assert launch(ctx, plugin("pass", collect=collect)) == 1
    assert "collecting the result failed: KeyError" in read_result(ctx.result_path)["error"]


@pytest.mark.parametrize(("node_rank", "owner", "writes"),
                         [(0, "first", True), (1, "first", False), (0, "last", False), (1, "last", True)])
def test_only_one_node_writes_the_result(tmp_path, node_rank, owner, writes):
    ctx = context(tmp_path, NNODES="2", DP="2", NODE_RANK=str(node_rank))
    fake = plugin("pass", result_node=owner)
    assert writes_result(ctx, fake) is writes
    assert ctx.log_path.name == f"train_cpu_tran_llama_node{node_rank}.log"
    code = launch(ctx, fake)
    assert ctx.result_path.exists() is writes
    assert code == (1 if writes else 0)  # the writer finds no result from the stand-in: failed


def test_torchrun_gets_the_rendezvous_arguments(tmp_path):
    cfg = context(tmp_path, NNODES="2", DP="2", NODE_RANK="1", MASTER_ADDR="10.0.0.5", MASTER_PORT="29555").cfg
    argv = torchrun_argv(cfg)
    assert argv[1:3] == ["-m", "torch.distributed.run"]
    assert argv[3:] == ["--nproc-per-node=1", "--nnodes=2", "--node-rank=1", "--master-addr=10.0.0.5",
                        "--master-port=29555"]


def test_cli_rejects_unknown_framework_and_bad_config(tmp_path):
    import subprocess

    env = {"PATH": "/usr/bin:/bin", "TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "MBS": "x"}
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                           "--model", "llama", "--dry-run"], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "MBS='x'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "jax",
                           "--model", "llama"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'jax'" in proc.stderr
