"""The Slurm job a run is part of (``shell/slurm.sbatch``): what its result records, and whether Slurm ended it.

Why ask Slurm: ``scancel`` and a time limit reach every process as SIGTERM from ``slurmstepd``, which the launcher
cannot tell from a SIGTERM sent by hand; so inside a job step Slurm is asked (``squeue``, bounded) whether it is
ending the job (:func:`slurm_ending`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from utils.io.sanitise import one_line

SQUEUE_SECONDS = 5.0
MAX_NODE_LIST = 1000
# The job states of a job Slurm is ending or has ended (squeue's %T), and its reasons (%r) in words.
ENDING_STATES = ("COMPLETING", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "DEADLINE", "BOOT_FAIL")
REASONS = {"None": "", "TimeLimit": " at its time limit", "Deadline": " at its deadline"}


def _job_id(env: Mapping[str, str]) -> int | None:
    text = env.get("SLURM_JOB_ID", "")
    return int(text) if text.isdigit() and 0 < len(text) <= 12 else None


def slurm_job(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The Slurm job of this process (``environment.slurm`` of a result), or None outside a Slurm job."""
    env = os.environ if environ is None else environ
    job_id, nodes = _job_id(env), env.get("SLURM_JOB_NUM_NODES", "")
    node_list = one_line(env.get("SLURM_JOB_NODELIST", ""), MAX_NODE_LIST)
    if job_id is None or not nodes.isdigit() or not 0 < int(nodes) < 10**9 or not node_list:
        return None
    return {"job_id": job_id, "node_list": node_list, "nodes": int(nodes)}


def under_slurmstepd(pid: int | None = None) -> bool:
    """Whether ``pid`` (this process) descends from Slurm's step daemon, which delivers Slurm's signals."""
    pid = os.getpid() if pid is None else pid
    for _ in range(64):  # a bounded walk up the process tree
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        name, _, rest = stat.partition("(")[2].rpartition(")")
        if name.startswith("slurmstepd"):
            return True
        fields = rest.split()
        pid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
        if pid <= 1:
            return False
    return False


def slurm_ending(environ: Mapping[str, str] | None = None) -> str | None:
    """"Slurm cancelled job N" (and why, from Slurm) when Slurm is ending this process's job; None otherwise."""
    env = os.environ if environ is None else environ
    job_id = _job_id(env)
    if job_id is None or not under_slurmstepd():
        return None
    try:
        answer = subprocess.run(["squeue", "--noheader", f"--jobs={job_id}", "--states=all", "--format=%T %r"],
                                capture_output=True, text=True, timeout=SQUEUE_SECONDS, check=False,
                                env=dict(env)).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if len(answer) != 2 or answer[0] not in ENDING_STATES:
        return None
    state, reason = answer
    if reason in REASONS:
        return f"Slurm cancelled job {job_id}{REASONS[reason]}"
    return f"Slurm ended job {job_id} ({one_line(state, 40)}, reason {one_line(reason, 80)})"
