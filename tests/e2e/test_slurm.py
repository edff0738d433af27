"""shell/slurm.sbatch with recording stand-ins for srun, scontrol and sinfo: who runs what on which nodes.

These need no Slurm; tests/e2e/test_slurm_cluster.py runs the same script on a real one.
"""

from __future__ import annotations

import subprocess
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
