"""train/launch/launcher.py: the shared launcher guarantees a result, whatever the job does."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from train.launch.context import load_plugin, log_path_for
from train.launch.contract import LaunchPlan, RunContext
from train.launch.job_result import collect_own_result
from train.launch.launcher import launch, writes_result
from train.launch.torchrun import torchrun_argv
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.dataset.paths import job_data
from utils.measure.memory import tran_recipe
from utils.result.file import read_result, result_path
from utils.schema.hardware import FrameworkVersions
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape
from utils.spec.registry import FRAMEWORKS


def context(tmp_path: Path, framework: str = "tran", **overrides: str) -> RunContext:
    env = {"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path), "DP": "1",
           "GPUS_PER_NODE": "1", **overrides}
    cfg = load_config(environ=env)
    return RunContext(cfg=cfg, platform="cpu", framework=framework, model="llama", run_index=None,
                      result_path=result_path(cfg.output_dir, "cpu", framework, "llama"),
                      log_path=log_path_for(cfg, "cpu", framework, "llama", None), data=job_data(cfg, "llama"),
                      shape=workload_shape(cfg, "llama"))


def stand_in_preflight(ctx, plan):
    """The stand-in framework's preflight: nothing to resolve (the real: tests/unit/train/launch/test_preflight.py)."""
    return (EffectiveSettings(settings={"stand_in": True}, env=dict(plan.env), resolved_by="test stand-in"),
            FrameworkVersions(unknown={"torch": "test stand-in"}))


def plugin(script: str, collect=lambda ctx, plan, rc: None, files=None, preflight=stand_in_preflight):
    """A stand-in framework whose command is a Python one-liner."""
    return SimpleNamespace(
        plan=lambda ctx: LaunchPlan(argv=[sys.executable, "-c", script], env={"TPRIMAT_TEST_VAR": "1"},
                                    files=files or {}, reads_dataset=False),
        collect=collect, preflight=preflight,
        memory=lambda ctx, plan: tran_recipe("fsdp2", ctx.cfg.world_size),  # sized like tran (issue 22)
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
    assert result.status == "failed"
    assert "exit code 3" in result.error and "CUDA out of memory" in result.error
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
    assert result.status == "incomplete" and "interrupted" in result.error


def ok_result(ctx, plan, rc):
    """A stand-in ``collect`` that reports every step done: an ok result."""
    from utils.machine.hardware import collect_gpu_info
    from utils.result.file import finalize_result, new_result
    from utils.result.step_log import record_steps
    from utils.schema.measures import Source
    from utils.spec.models import get_shape

    shape = get_shape("llama", ctx.cfg.model_size)
    result = new_result(ctx.cfg, platform="cpu", framework="tran", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    steps = ctx.cfg.train_iters
    record_steps(result, {"step_times": [1.0] * steps, "loss_values": [1.0] * steps,
                          "learning_rates": [0.0] * steps}, skip_steps=ctx.cfg.skip_steps, shape=shape)
    return finalize_result(result, "ok", None)


def test_success_claimed_with_non_zero_exit_is_failed(tmp_path):
    ctx = context(tmp_path)
    assert launch(ctx, plugin("raise SystemExit(5)", collect=ok_result)) == 1
    result = read_result(ctx.result_path)
    assert result.status == "failed" and "exited with code 5 after reporting success" in result.error


def test_collector_bug_still_leaves_a_result(tmp_path):
    ctx = context(tmp_path)

    def collect(ctx, plan, rc):
        raise KeyError("iteration")

    assert launch(ctx, plugin("pass", collect=collect)) == 1
    assert "collecting the result failed: KeyError" in read_result(ctx.result_path).error


def test_in_process_plugins_name_the_cause_found_in_the_log(tmp_path):
    ctx = context(tmp_path)
    assert collect_own_result(ctx, 1) is None  # no result, no log: the launcher records exit code and tail
    ctx.log_path.parent.mkdir(parents=True, exist_ok=True)
    ctx.log_path.write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    result = collect_own_result(ctx, 1)
    assert result.status == "failed" and result.error.startswith("out of memory: torch.OutOfMemoryError")
    assert "exit code 1; no result was written" in result.error
    assert collect_own_result(ctx, 143).status == "incomplete"  # killed by SIGTERM
    ctx.log_path.write_text("Traceback (most recent call last):\nValueError: bad shape\n")
    assert collect_own_result(ctx, 1) is None  # a generic exception: the launcher keeps the log's tail


def test_plugins_and_result_nodes_come_from_the_registry():
    for key, framework in FRAMEWORKS.items():
        module = load_plugin(key)
        assert module.__name__ == framework.plugin and callable(module.plan) and callable(module.collect)
    with pytest.raises(ValueError, match="allowed values are"):
        load_plugin("jax")


@pytest.mark.parametrize(("node_rank", "framework", "writes"),
                         [(0, "tran", True), (1, "tran", False), (0, "mega", False), (1, "mega", True)])
def test_only_one_node_writes_the_result(tmp_path, node_rank, framework, writes):
    ctx = context(tmp_path, framework, NNODES="2", DP="2", NODE_RANK=str(node_rank))
    fake = plugin("pass")
    assert writes_result(ctx) is writes
    assert ctx.log_path.name == f"train_cpu_{framework}_llama_node{node_rank}.log"
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


def test_a_signal_to_the_launcher_stops_the_whole_job_and_is_recorded(tmp_path):
    """SIGINT to the launcher reaches the job's children's children; the job is incomplete, the exit 130."""
    import os
    import signal
    import threading
    import time

    from tests.helpers.proc import all_gone

    ctx = context(tmp_path)
    marker = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              f"open({str(marker)!r}, 'w').write(str(p.pid))\ntime.sleep(120)")

    def interrupt_once_started() -> None:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    assert launch(ctx, plugin(script)) == 128 + signal.SIGINT
    result = read_result(ctx.result_path)
    assert result.status == "incomplete" and result.error.startswith("interrupted by SIGINT")
    assert all_gone([int(marker.read_text())], timeout=10), "the job's grandchild was stopped too"


def test_torchruns_log_folder_is_the_jobs_scratch_removed_after_it(tmp_path):
    """torchrun made ``torchelastic_<random>/`` in TMPDIR for every job and never removed it (issue 33): its
    ``--log-dir`` (``PET_LOG_DIR``, so the planned command is unchanged) is now the job's scratch folder."""
    ctx = context(tmp_path / "out")
    seen = tmp_path / "seen"
    script = ("import os, pathlib; folder = pathlib.Path(os.environ['PET_LOG_DIR']); "
              f"(folder / 'rank0').mkdir(); pathlib.Path({str(seen)!r}).write_text(str(folder))")
    launch(ctx, plugin(script))
    folder = Path(seen.read_text())
    assert folder.parent == ctx.cfg.output_dir / ".tprimat" / "scratch", folder
    assert not folder.exists(), "removed after the job"
