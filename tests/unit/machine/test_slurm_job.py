"""utils/machine/slurm.py: the Slurm job a result records, and the words for a job Slurm ended (issue 51).

The real daemons are tests/e2e/test_slurm_cluster.py's; here stand-ins: a process named ``slurmstepd`` and a
``squeue`` that answers what Slurm answers for a cancelled, timed-out or running job.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.proc import descendants, wait_for
from utils.machine import slurm
from utils.machine.environment import capture_environment
from utils.machine.slurm import slurm_ending, slurm_job, under_slurmstepd
from utils.schema.hardware import Environment

JOB = {"SLURM_JOB_ID": "4127", "SLURM_JOB_NODELIST": "gpu-[01-02]", "SLURM_JOB_NUM_NODES": "2"}


def test_a_slurm_job_is_recorded_with_its_id_node_list_and_nodes() -> None:
    assert slurm_job(JOB) == {"job_id": 4127, "node_list": "gpu-[01-02]", "nodes": 2}
    captured = capture_environment(environ={**os.environ, **JOB})
    assert Environment.model_validate(captured).slurm.nodes == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("env", [
    {},
    {**JOB, "SLURM_JOB_ID": "12; rm -rf /"},
    {**JOB, "SLURM_JOB_NUM_NODES": "0"},
    {**JOB, "SLURM_JOB_NUM_NODES": "two"},
    {key: value for key, value in JOB.items() if key != "SLURM_JOB_NODELIST"},
])
def test_outside_a_slurm_job_or_with_foreign_values_nothing_is_recorded(env: dict[str, str]) -> None:
    assert slurm_job(env) is None


def test_a_hostile_node_list_is_kept_as_one_bounded_line() -> None:
    recorded = slurm_job({**JOB, "SLURM_JOB_NODELIST": "n1\n\x1b[2Jn2" + "x" * 5000})
    assert recorded is not None and "\n" not in recorded["node_list"] and "\x1b" not in recorded["node_list"]
    assert len(recorded["node_list"]) <= slurm.MAX_NODE_LIST


def test_a_process_below_slurmstepd_is_found_and_init_is_not(tmp_path: Path) -> None:
    stepd = tmp_path / "slurmstepd"  # the kernel names a script's process after the script
    stepd.write_text("#!/bin/sh\nsleep 30\n")
    stepd.chmod(0o755)
    proc = subprocess.Popen([str(stepd)])
    try:
        wait_for(lambda: bool(descendants(proc.pid)), 10, "the stand-in step's child")
        assert under_slurmstepd(descendants(proc.pid)[0])
    finally:
        proc.kill()
        proc.wait()
    assert not under_slurmstepd(1)  # init, the top of every tree


@pytest.fixture
def squeue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A stand-in squeue answering ``answer`` and recording its arguments; this process counts as a job step."""
    monkeypatch.setattr(slurm, "under_slurmstepd", lambda: True)

    def answering(answer: str) -> dict[str, str]:
        (tmp_path / "squeue").write_text(f'#!/bin/sh\necho "$*" > "{tmp_path}/args"\necho "{answer}"\n')
        (tmp_path / "squeue").chmod(0o755)
        return {**JOB, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    return answering


@pytest.mark.parametrize(("answer", "words"), [
    ("COMPLETING None", "Slurm cancelled job 4127"),  # scancel: the job ends while its task still runs
    ("CANCELLED None", "Slurm cancelled job 4127"),
    ("COMPLETING TimeLimit", "Slurm cancelled job 4127 at its time limit"),
    ("PREEMPTED Preempted", "Slurm ended job 4127 (PREEMPTED, reason Preempted)"),
    ("RUNNING None", None),  # a step stopped by srun --kill-on-bad-exit, or a signal sent by hand
    ("", None),
    ("slurm_load_jobs error: Invalid job id specified", None),
])
def test_slurm_says_how_the_job_ended(squeue, tmp_path: Path, answer: str, words: str | None) -> None:
    assert slurm_ending(squeue(answer)) == words
    assert (tmp_path / "args").read_text().split() == ["--noheader", "--jobs=4127", "--states=all",
                                                        "--format=%T", "%r"]


def test_slurm_is_asked_only_inside_a_job_step(squeue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = squeue("COMPLETING None")
    assert slurm_ending({key: value for key, value in env.items() if key != "SLURM_JOB_ID"}) is None
    monkeypatch.setattr(slurm, "under_slurmstepd", lambda: False)
    assert slurm_ending(env) is None
    assert not (tmp_path / "args").exists()
