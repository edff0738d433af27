"""shell/slurm.sbatch with recording stand-ins for srun, scontrol and sinfo: who runs what on which nodes.

These need no Slurm; tests/e2e/test_slurm_cluster.py runs the same script on a real one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env


def fake_slurm(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    record = tmp_path / "srun.calls"
    (bin_dir / "srun").write_text(f'#!/bin/sh\necho "$*" >> "{record}"\n')
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'node-a\\nnode-b\\n'\n")
    (bin_dir / "sinfo").write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path / "sinfo.calls"}"\necho 10.0.0.7\n')  # NodeAddr
    for tool in ("srun", "scontrol", "sinfo"):
        (bin_dir / tool).chmod(0o755)
    env = clean_env(tmp_path, SLURM_SUBMIT_DIR=str(REPO), SLURM_JOB_NODELIST="node-[a-b]", SLURM_JOB_NUM_NODES="2",
                    DP="16")  # 2 nodes x 8 GPUs
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


@pytest.mark.parametrize(("step", "expected"), [
    ("train", "--ntasks-per-node=1 --kill-on-bad-exit=1 shell/slurm_node.sh train"),
    ("data", "--nodes=1 --ntasks=1 shell/slurm_node.sh data"),  # once: nodes share DATA_DIR
])
def test_one_task_per_node_for_training_and_one_task_for_data(tmp_path, step, expected):
    env = fake_slurm(tmp_path)
    proc = subprocess.run(["bash", str(REPO / "shell" / "slurm.sbatch"), step], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # MASTER_ADDR: the first node's address as Slurm has it (NodeAddr), asked of sinfo
    assert "2 node(s), master 10.0.0.7:29500" in proc.stdout
    assert (tmp_path / "sinfo.calls").read_text().split() == ["--noheader", "--Node", "--nodes=node-a", "--format=%o"]
    assert (tmp_path / "srun.calls").read_text().strip() == expected


def test_without_an_address_from_sinfo_the_first_node_name_is_the_master(tmp_path):
    env = fake_slurm(tmp_path)
    (tmp_path / "slurm-bin" / "sinfo").write_text("#!/bin/sh\nexit 1\n")
    proc = subprocess.run(["bash", str(REPO / "shell" / "slurm.sbatch"), "train"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "2 node(s), master node-a:29500" in proc.stdout


def test_unknown_step_is_refused(tmp_path):
    proc = subprocess.run(["bash", str(REPO / "shell" / "slurm.sbatch"), "purge"], env=fake_slurm(tmp_path),
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "step must be data or train" in proc.stderr
    assert not (tmp_path / "srun.calls").exists()


def test_a_world_size_that_does_not_fit_the_nodes_fails_before_any_node_starts(tmp_path):
    env = {**fake_slurm(tmp_path), "DP": "8"}  # 8 GPUs of work for 2 nodes x 8 GPUs
    proc = subprocess.run(["bash", str(REPO / "shell" / "slurm.sbatch")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "NNODES*GPUS_PER_NODE = 2*8 = 16" in proc.stderr
    assert not (tmp_path / "srun.calls").exists()


@pytest.mark.parametrize(("script", "usage"), [
    ("slurm.sbatch", "Usage: sbatch --nodes=N shell/slurm.sbatch [train|data]"),
    ("slurm_node.sh", "Usage: shell/slurm_node.sh data|train"),
    ("slurm_throwaway.sh", "Usage: shell/slurm_throwaway.sh COMMAND [ARGS...]"),
])
def test_help_works_outside_slurm(tmp_path, script, usage):
    env = clean_env(tmp_path)  # no SLURM_* variable, no Slurm on PATH needed
    proc = subprocess.run(["bash", str(REPO / "shell" / script), "--help"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout.startswith(usage), proc.stdout + proc.stderr


def test_the_throwaway_cluster_without_slurm_says_what_to_install(tmp_path):
    env = {**clean_env(tmp_path), "PATH": str(tmp_path)}  # no munged, slurmctld, slurmd ...
    proc = subprocess.run(["/bin/bash", str(REPO / "shell" / "slurm_throwaway.sh"), "true"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == ("slurm_throwaway: no munged on PATH (install the Debian packages slurmctld slurmd "
                           "slurm-client munge)\n")


def test_no_node_from_scontrol_is_refused_before_any_node_starts(tmp_path):
    """Issue 49's hostile pass (L11): an empty node list made MASTER_ADDR empty, i.e. localhost on every node."""
    env = fake_slurm(tmp_path)
    (tmp_path / "slurm-bin" / "scontrol").write_text("#!/bin/sh\nexit 0\n")
    proc = subprocess.run(["bash", str(REPO / "shell" / "slurm.sbatch")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == ("slurm.sbatch: scontrol named no node of "
                                                    "SLURM_JOB_NODELIST='node-[a-b]' within 10 s\n")
    assert not (tmp_path / "srun.calls").exists()


@pytest.mark.parametrize("signalled", [False, True])
def test_a_slurm_query_that_hangs_is_bounded_and_scancel_during_it_stops_the_script(tmp_path, signalled):
    """Issue 49's hostile pass (L13): a sinfo that never answered held the batch script without end. scancel signals
    every process of the batch step (here: the script's process group; `timeout --foreground` stays in it), and the
    script stops at once, no srun."""
    env = fake_slurm(tmp_path)
    (tmp_path / "slurm-bin" / "sinfo").write_text("#!/bin/sh\nexec sleep 1000\n")
    started = time.monotonic()
    proc = subprocess.Popen(["bash", str(REPO / "shell" / "slurm.sbatch")], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        if signalled:
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)  # sinfo's bound is 10 s
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    if signalled:
        assert proc.returncode == -signal.SIGTERM and time.monotonic() - started < 8, err
        assert not (tmp_path / "srun.calls").exists()
    else:
        assert proc.returncode == 0, err
        assert err == "slurm.sbatch: sinfo failed or did not answer within 10 s: the node's name 'node-a' is used\n"
        assert "master node-a:29500" in out


@pytest.mark.parametrize("script", ["slurm.sbatch", "slurm_node.sh", "slurm_throwaway.sh", "postgres_throwaway.sh",
                                    "entry.sh"])
def test_an_argument_with_control_characters_is_shown_quoted_and_cut(tmp_path, script):
    """Issue 49's hostile pass (L18, L22): the scripts echoed a refused argument raw, escapes and line breaks too."""
    word = "-x\x1b[2J\n# FORGED" + "y" * 100
    proc = subprocess.run(["bash", str(REPO / "shell" / script), word], env=fake_slurm(tmp_path), cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    first = proc.stderr.splitlines()[0]
    assert proc.returncode == 2 and "\x1b" not in proc.stderr and "\n# FORGED" not in proc.stderr, proc.stderr
    assert "$'-x\\E[2J\\n# FORGED" in first and "y" * 30 not in first
