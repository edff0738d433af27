"""shell/slurm.sbatch with recording stand-ins for srun/scontrol: who runs what on which nodes."""

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
    for tool in ("srun", "scontrol"):
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
    assert "2 node(s), master node-a:29500" in proc.stdout
    assert (tmp_path / "srun.calls").read_text().strip() == expected


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
