"""shell/slurm.sbatch on a real Slurm: two slurmd on this host (shell/slurm_throwaway.sh), the tiny cpu workload.

The module starts one throwaway cluster (munged, slurmctld, slurmd n1 and n2 at 127.0.0.1) and submits the real
path to it: ``sbatch --wait --nodes=2 shell/slurm.sbatch data``, then ``train`` (two nodes of one CPU "GPU" each,
DP=2), a node that dies, a ``scancel`` during training, and a world size the allocation cannot hold. The jobs run
from a copy of the checkout without the comparison (``tests/helpers/shell.py``), on the session's sample data.
Needs Debian's slurmctld, slurmd, slurm-client and munge packages and root (``.ci/run`` installs them); without
them the module skips saying so, and fails under CI (``CI=true`` or ``TPRIMAT_REQUIRE_SLURM=1``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.proc import command_line, free_port, wait_for
from tests.helpers.required import require
from tests.helpers.shell import copy_repo, without_comparison
from tests.helpers.workload import tiny_environ
from utils.config.load import load_config
from utils.machine.cpu_precision import apply_cpu_precision
from utils.machine.rendezvous import port_problem

THROWAWAY = Path(__file__).resolve().parents[2] / "shell" / "slurm_throwaway.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "squeue", "scancel")
_absent = [tool for tool in TOOLS if shutil.which(tool) is None]
require(f"no {', '.join(_absent)} on PATH: apt-get install slurmctld slurmd slurm-client munge (.ci/run installs "
        "them)" if _absent else "a real Slurm needs root (slurmd starts the job steps)" if os.geteuid() else None,
        "TPRIMAT_REQUIRE_SLURM")

# Two nodes of one CPU "GPU" each, as shell/slurm.sbatch's world-size check wants: DP=2 = NNODES*GPUS_PER_NODE.
TWO_NODES = {"GPUS_PER_NODE": "1", "DP": "2", "GA": "1", "MBS": "2", "MODELS": "llama", "TRAIN_ITERS": "4",
             "WARMUP_STEPS": "1", "HISTORY_DB": "off"}
RESULT = "train_cpu_tran_llama.json"
JOB_SECONDS = 300


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    """A running throwaway cluster: its SLURM_CONF and the line it printed; stopped when the module ends."""
    proc = subprocess.Popen([str(THROWAWAY), "sh", "-c", 'echo "SLURM_CONF=$SLURM_CONF"; exec cat >/dev/null'],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    started = proc.stdout.readline()
    conf = proc.stdout.readline().strip()
    if not conf.startswith("SLURM_CONF="):
        proc.wait(timeout=60)
        pytest.fail(f"the throwaway cluster did not start: {proc.stderr.read() if proc.stderr else ''}")
    try:
        yield {"SLURM_CONF": conf.removeprefix("SLURM_CONF="), "started": started}
    finally:
        proc.stdin.close()  # its command ends; it cancels what is left and stops every daemon
        proc.wait(timeout=90)
    assert not Path(conf.removeprefix("SLURM_CONF=")).exists(), "the cluster's folder was left behind"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The submit directory: a copy of the checkout, without the comparison (nothing here asserts on it)."""
    return without_comparison(copy_repo(tmp_path_factory.mktemp("slurm-repo") / "repo"))


@pytest.fixture
def job_env(cluster: dict[str, str], sample_data_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    def make(**overrides: str) -> dict[str, str]:
        return tiny_environ(sample_data_dir, tmp_path / "out", **{
            **TWO_NODES, "SLURM_CONF": cluster["SLURM_CONF"], "MASTER_PORT": str(free_port()), **overrides})
    return make


def sbatch(checkout: Path, env: dict[str, str], step: str, out: Path, wait: bool = True) -> subprocess.Popen[str]:
    """``sbatch --wait --nodes=2 shell/slurm.sbatch STEP`` from the checkout; its first line is the job id."""
    argv = ["sbatch", "--parsable", "--nodes=2", f"--output={out}", "shell/slurm.sbatch", step]
    return subprocess.Popen(argv[:1] + ["--wait"] * wait + argv[1:], cwd=checkout, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = proc.communicate(timeout=JOB_SECONDS)
    return proc.returncode, stdout, stderr


def environment_of(pid: int) -> bytes:
    """``pid``'s environment as NUL-separated ``NAME=value`` entries, each between NULs (b"" once it is gone)."""
    try:
        return b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def job_processes(job_id: str, *also: str) -> list[int]:
    """The living processes Slurm started for ``job_id`` (the job id in their environment), with ``also`` set."""
    wanted = [f"\0{entry}\0".encode() for entry in (f"SLURM_JOB_ID={job_id}", *also)]
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and all(marker in environment_of(int(entry.name)) for marker in wanted)]


def read_result(env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    return json.loads((Path(env["OUTPUT_DIR"]) / RESULT).read_text())


def test_the_cluster_has_two_idle_nodes(cluster: dict[str, str]) -> None:
    assert re.match(r"slurm_throwaway: slurm-wlm \d+\.\d+\.\d+ on \S+: nodes n1, n2 idle", cluster["started"])
    nodes = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%N %o %t"], env={**os.environ, **cluster},
                           capture_output=True, text=True, timeout=30).stdout.split("\n")
    assert nodes[:2] == ["n1 127.0.0.1 idle", "n2 127.0.0.1 idle"]


def ports(started: str) -> tuple[str, ...]:
    found = re.search(r"slurmctld on 127\.0\.0\.1:(\d+), slurmd on (\d+) and (\d+);", started)
    assert found, started
    return found.groups()


def test_a_second_cluster_takes_other_ports_and_runs_apart(cluster: dict[str, str]) -> None:
    env = {key: value for key, value in os.environ.items() if key != "SLURM_CONF"}
    proc = subprocess.run([str(THROWAWAY), "sinfo", "--noheader", "--Node", "--format=%N %t"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    started, *nodes = proc.stdout.splitlines()
    assert set(ports(started)).isdisjoint(ports(cluster["started"]))  # the first cluster holds its ports
    assert nodes == ["n1 idle", "n2 idle"]


def test_a_daemon_that_fails_is_named_in_one_line_and_nothing_is_left(cluster: dict[str, str],
                                                                      tmp_path: Path) -> None:
    fakes = tmp_path / "bin"
    fakes.mkdir()
    (fakes / "slurmd").write_text("#!/bin/sh\necho 'slurmd: fatal: Unable to bind listen port (stand-in)' >&2\n"
                                  "exit 1\n")
    (fakes / "slurmd").chmod(0o755)
    env = {**{key: value for key, value in os.environ.items() if key != "SLURM_CONF"},
           "PATH": f"{fakes}:{os.environ['PATH']}"}
    before = set(Path("/tmp").glob("tprimat-slurm.*"))
    proc = subprocess.run([str(THROWAWAY), "touch", str(tmp_path / "ran")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "ran").exists()
    assert re.fullmatch(r"slurm_throwaway: slurmd n[12] exited during start-up: slurmd: fatal: Unable to bind listen "
                        r"port \(stand-in\)\n", proc.stderr), proc.stderr
    # Its folder is gone, and so are the munged and slurmctld it had started (the module's cluster runs on).
    assert set(Path("/tmp").glob("tprimat-slurm.*")) <= before
    ours = str(Path(cluster["SLURM_CONF"]).parent)
    assert [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if "tprimat-slurm." in command_line(pid) and ours not in command_line(pid)] == []


def test_data_then_train_on_two_nodes_writes_an_ok_result_with_the_slurm_job(checkout, job_env, tmp_path) -> None:
    env = job_env()
    code, _, err = finished(sbatch(checkout, env, "data", tmp_path / "data.out"))
    data_log = (tmp_path / "data.out").read_text()
    assert code == 0, err + data_log[-3000:]
    assert data_log.count("slurm_node.sh:") == 1, data_log  # once, on the first node: the nodes share DATA_DIR
    assert "is node 0 of 2" in data_log and "data.sh: datasets ready and verified" in data_log

    code, job_id, err = finished(sbatch(checkout, env, "train", tmp_path / "train.out"))
    train_log = (tmp_path / "train.out").read_text()
    assert code == 0, err + train_log[-3000:]
    assert "slurm.sbatch: 2 node(s), master 127.0.0.1:" in train_log
    assert "is node 0 of 2" in train_log and "is node 1 of 2" in train_log
    result = read_result(env)
    assert result["status"] == "ok", result["error"]
    config = result["training_config"]
    assert (config["nnodes"], config["gpus_per_node"], config["num_gpus"]) == (2, 1, 2)
    assert result["environment"]["slurm"] == {"job_id": int(job_id), "node_list": "n[1-2]", "nodes": 2}
    assert len(result["step_times"]) == 4 and all(isinstance(loss, float) for loss in result["loss_values"])
    # The workload shell/train.sh records for the same settings on one node of two GPUs (with the precision this CPU
    # runs, as the launcher records it): Slurm changes nothing of it.
    one_node_env = {**env, "NNODES": "1", "NODE_RANK": "0", "GPUS_PER_NODE": "2"}
    one_node = apply_cpu_precision(load_config(environ=one_node_env), "cpu", env=one_node_env)[0].workload()
    assert {key: config["workload"][key] for key in one_node} == one_node


def test_a_node_that_dies_stops_the_other_and_the_job_has_a_result(checkout, job_env, tmp_path) -> None:
    env = job_env(TRAIN_ITERS="200")
    started = time.monotonic()
    proc = sbatch(checkout, env, "train", tmp_path / "train.out")
    assert proc.stdout is not None
    job_id = proc.stdout.readline().strip()
    result_file = Path(env["OUTPUT_DIR"]) / RESULT

    def node1_launcher() -> list[int]:
        return [pid for pid in job_processes(job_id, "NODE_RANK=1") if "train.launch" in command_line(pid)]

    # Node 0 has its result on record (its launcher runs), node 1's launcher is up: node 1 dies.
    wait_for(lambda: result_file.exists() and bool(node1_launcher()), 120, "both nodes' launchers")
    for pid in node1_launcher():
        os.kill(pid, signal.SIGKILL)
    code, _, _ = finished(proc)
    log = (tmp_path / "train.out").read_text()
    assert code != 0
    assert re.search(r"srun: error: n2: task 1: Exited with exit code [1-9]", log), log[-3000:]
    assert "Terminating StepId=" in log, log[-3000:]  # --kill-on-bad-exit: srun stops node 0's task
    result = read_result(env)
    assert result["status"] in ("failed", "incomplete") and result["error"], result
    assert "SIGTERM" in result["error"]  # node 0 stopped by Slurm, not by its own failure
    assert result["environment"]["slurm"]["job_id"] == int(job_id)
    assert time.monotonic() - started < 150  # node 0 did not wait out the rendezvous
    wait_for(lambda: job_processes(job_id) == [], 30, f"no process of job {job_id}")


def test_scancel_during_training_keeps_the_steps_and_names_slurm(checkout, job_env, tmp_path, cluster) -> None:
    env = job_env(TRAIN_ITERS="200")
    proc = sbatch(checkout, env, "train", tmp_path / "train.out")
    assert proc.stdout is not None
    job_id = proc.stdout.readline().strip()
    steps = Path(env["OUTPUT_DIR"]) / RESULT.replace(".json", ".steps.jsonl")
    wait_for(lambda: steps.exists() and len(steps.read_text().splitlines()) >= 3, 180, "three finished steps")
    subprocess.run(["scancel", job_id], env={**os.environ, **cluster}, check=True, timeout=30)
    code, _, _ = finished(proc)
    assert code != 0
    # sbatch --wait returns once the job is cancelled, while its processes still stop: the result comes after them.
    wait_for(lambda: job_processes(job_id) == [], 60, f"no process of job {job_id}")
    result = read_result(env)
    assert result["status"] == "incomplete"
    assert result["error"].startswith(f"Slurm cancelled job {job_id}: interrupted by SIGTERM"), result["error"]
    done = len(result["step_times"])
    assert 3 <= done < 200 and f"({done} of 200 steps done)" in result["error"]
    assert all(isinstance(loss, float) for loss in result["loss_values"])
    assert port_problem(int(env["MASTER_PORT"])) is None


def test_a_world_size_the_allocation_cannot_hold_is_refused_before_any_node_starts(checkout, job_env,
                                                                                   tmp_path) -> None:
    env = job_env(DP="4")  # four ranks for 2 nodes x 1 GPU
    code, _, _ = finished(sbatch(checkout, env, "train", tmp_path / "train.out"))
    log = (tmp_path / "train.out").read_text()
    assert code == 2, log
    assert "NNODES*GPUS_PER_NODE = 2*1 = 2" in log
    assert "slurm_node.sh" not in log and not (Path(env["OUTPUT_DIR"]) / RESULT).exists()
