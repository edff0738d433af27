"""Which run owns a job's result file, and what ``shell/train.sh`` does before and after each job.

Why: a signal before the launcher wrote anything must still leave a result, and a killed launcher's orphaned workers
must not rewrite a result later. ``start`` locks and claims the result for the run (``TPRIMAT_RUN_ID``) and writes an
``incomplete`` one; a process whose run no longer owns the file writes nothing; ``end`` stops what is left of the run
and, where its ``start`` claimed the file, words the reason and releases the lock.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.files.locks import Holder, LockError, LockHeld, lock_descriptor, release_fd, result_lock_path
from utils.machine.rendezvous import seconds_argument as _seconds
from utils.machine.rendezvous import wait_for_port
from utils.result.file import ResultError, new_result, read_result, update_result, write_result
from utils.result.run_claim import CLOSED_PREFIX, RUN_ID_ENV, claim, current_owner
from utils.schema.hardware import GpuInfo
from utils.schema.measures import Source
from utils.spec.models import get_shape

STARTED_REASON = "shell/train.sh started this job; its launcher has recorded nothing yet"
REAP_SECONDS = 5.0


# ---------------------------------------------------------------------------
# the processes of a run


def processes_of(run_id: str) -> list[int]:
    """Every process (but this one) whose environment carries ``TPRIMAT_RUN_ID=run_id`` (Linux /proc)."""
    needle = f"{RUN_ID_ENV}={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def reap(run_id: str, seconds: float = REAP_SECONDS) -> int:
    """SIGTERM every process left of the run, SIGKILL what is alive after ``seconds``; how many there were."""
    left = processes_of(run_id)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + seconds
        while (alive := processes_of(run_id)) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not alive:
            break
    return len(left)


# ---------------------------------------------------------------------------
# train.sh's two steps


def start(path: Path, platform: str, framework: str, model: str, run_index: int | None, run_id: str,
          lock_fd: int, holder_pid: int, wait_port: float = 0.0) -> list[str]:
    """Lock and claim ``path`` for ``run_id``, write the ``incomplete`` result a stopped job leaves; the lines to show.
    ``lock_fd``: train.sh's descriptor on the result's lock file, locked for ``holder_pid`` (train.sh) until ``end``
    (LockHeld: another run holds it). ``wait_port``: wait up to that many seconds for MASTER_PORT to be freed first
    (the job before this one may have left it in TIME_WAIT or to a process that is still exiting)."""
    cfg = load_config()
    busy = wait_for_port(cfg.master_port, wait_port) if wait_port > 0 and cfg.node_rank == 0 else None
    stack = {"amd": "rocm", "nvd": "cuda"}.get(platform, "cpu")
    gpu = GpuInfo(device_name=None, device_count=0, total_memory_gb=None, software_stack=stack,
                  software_version=None, pytorch_version=None, driver_version=None,
                  peak_tflops_reason="not collected: the launcher had not started")
    result = new_result(cfg, platform=platform, framework=framework, model=model,
                        shape=get_shape(model, cfg.model_size), gpu_info=gpu, source=Source(kind="callback"),
                        run_index=run_index)
    result.error = STARTED_REASON
    note = lock_descriptor(lock_fd, result_lock_path(path).absolute(), "the result",
                           Holder.me("shell/train.sh (run start)", pid=holder_pid))
    claim(path, run_id)
    write_result(path, result)
    return [line for line in (note, busy and f"{busy}; starting the job anyway") if line]


def end(path: Path, run_id: str, stopped_by: str | None, lock_fd: int | None = None) -> list[str]:
    """Stop what is left of the run, word a stopped job's reason, close the run, release ``lock_fd``; the lines."""
    try:
        return _end(path, run_id, stopped_by)
    finally:
        if lock_fd is not None:
            release_fd(lock_fd)


def _end(path: Path, run_id: str, stopped_by: str | None) -> list[str]:
    lines = []
    left = reap(run_id)
    if left:
        lines.append(f"stopped {left} process(es) the job left behind")
    owner = current_owner(path)
    if owner != run_id:
        # A run closes only what its own start claimed (issue 33): a refused start claimed nothing, and the file
        # belongs to whichever run holds it; closing that one would drop its finished result as "replaced".
        holder = f"run {owner[:8]}" if owner else "no run"
        return [*lines, f"run {run_id[:8]} never owned {path.name} ({holder} does); left as it is"]
    if stopped_by:
        with contextlib.suppress(ResultError):
            result = read_result(path)
            if result.status == "incomplete" and result.error == STARTED_REASON:
                update_result(result, error=f"interrupted by SIG{stopped_by} before its launcher recorded anything")
                write_result(path, result)
    claim(path, CLOSED_PREFIX + run_id)
    return lines


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.files.run_owner", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="claim the result for the run and write its incomplete result")
    p_start.add_argument("--result", type=Path, required=True)
    p_start.add_argument("--platform", required=True)
    p_start.add_argument("--framework", required=True)
    p_start.add_argument("--model", required=True)
    p_start.add_argument("--run-index", type=int)
    p_start.add_argument("--wait-port", type=_seconds, default=0.0, metavar="SECONDS",
                         help="first wait up to SECONDS for MASTER_PORT to be freed")
    p_end = sub.add_parser("end", help="stop what is left of the run and close it")
    p_end.add_argument("--result", type=Path, required=True)
    p_end.add_argument("--signal", choices=["INT", "TERM", "HUP"], help="the signal that stopped the job, if any")
    p_start.add_argument("--holder-pid", type=int, required=True, help="train.sh's pid ($$), the lock's holder")
    for each in (p_start, p_end):
        each.add_argument("--run-id", required=True)
        each.add_argument("--lock-fd", type=int, required=each is p_start, metavar="FD",
                          help="the descriptor train.sh opened on the result's lock file (utils.files.locks path "
                          "result FILE): locked by start, released by end")
    args = parser.parse_args(argv)

    try:
        if args.command == "start":
            lines = start(args.result, args.platform, args.framework, args.model, args.run_index, args.run_id,
                          args.lock_fd, args.holder_pid, args.wait_port)
        else:
            lines = end(args.result, args.run_id, args.signal, args.lock_fd)
        for line in lines:
            print(f"train.sh: {line}", file=sys.stderr)
    except ConfigError:
        raise  # a ValueError too, but said by exits_on_config_error
    except (LockHeld, LockError, ResultError, ValueError, OSError) as exc:
        print(f"run_owner: {args.result}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
