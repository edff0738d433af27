"""The launcher's eye on a Megatron-style job's evaluations: their arrival times, and the stop at the target.

Megatron-LM and Primus have no early stop at a target loss, and their lines carry no usable time (``elapsed time
per iteration`` leaves evaluation out, ``megatron/training/training.py:2359, 2389``). The watcher sees each line
of ``run_logged`` as it arrives: the first iteration line and each in-loop evaluation line are stamped with the
host's clock into a record beside the log (:func:`record_path`, read by :mod:`train.megatron.collect`). With
STOP_AT_TARGET, the first evaluation at or below TARGET_LOSS (or NaN/Inf) sends SIGTERM to **one worker**, which
``--exit-signal-handler`` turns into a stop all ranks agree on after the step, exit code 0
(``training.py:1830-1845``); signalling torchrun would make it kill the workers and fail the run.
:func:`watcher_for` makes one (None when the job needs none).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.launch.contract import LaunchPlan
from train.logs.patterns import EvaluationLine, clean_line, message_of, parse_iteration
from train.logs.quality import record_path
from train.logs.scan import EvaluationReader
from utils.config.model import Config

# The process that is the elastic agent, never the one to signal (its SIGTERM kills the workers, exit non-zero).
AGENTS = ("torchrun", "torch.distributed.run", "torch/distributed/run.py")


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/<pid>/stat`` (Linux; empty elsewhere)."""
    tree: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{name}/stat").read_text(encoding="utf-8", errors="replace")
                parent = int(stat.rsplit(")", 1)[1].split()[1])  # the command may hold spaces and ')'
                tree.setdefault(parent, []).append(int(name))
    return tree


def _command(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    return ""


def find_worker(root: int, script: str) -> int | None:
    """The worker process to signal under ``root``: the shallowest descendant running ``script`` that is not the
    elastic agent (a data-loader process forked by a worker runs the same command one level deeper)."""
    tree = _children()
    level, depth = [root], 0
    while level and depth < 16:
        found = sorted(pid for pid in level
                       if script in (command := _command(pid)) and not any(a in command for a in AGENTS))
        if found:
            return found[0]
        level, depth = [child for pid in level for child in tree.get(pid, [])], depth + 1
    return None


@dataclass
class TargetWatch:
    """Per line: the evaluation lines stamped and recorded, the stop sent once (see the module docstring)."""

    path: Path
    script: str
    target_loss: float | None
    stop_at_target: bool
    pid: int | None = None
    reader: EvaluationReader = field(default_factory=EvaluationReader)
    first_iteration_seen: bool = False
    stopped: str | None = None
    broken: bool = False

    def started(self, pid: int) -> None:
        """The job's first process started (``run_logged``'s child): the record starts empty."""
        self.pid = pid
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")

    def line(self, raw: str) -> None:
        """One line of the job's output, as it arrives (cheap for the lines that are neither).

        Never raises: the launcher's reading of the job's output must go on whatever a line holds.
        """
        if self.broken:
            return
        try:
            self._line(raw)
        except Exception as exc:  # a watcher bug must not stop the log or the job
            self.broken = True
            self._write({"kind": "problem", "problem": f"the watcher stopped: {type(exc).__name__}: {exc}"})

    def _line(self, raw: str) -> None:
        now = time.time()
        if not self.first_iteration_seen and "iteration" in raw:
            record = parse_iteration(clean_line(raw), 0)
            if record is not None and record.step_time_s is not None:
                self.first_iteration_seen = True
                self._write({"kind": "iteration", "iteration": record.iteration, "step_time_s": record.step_time_s,
                             "unix_s": now})
                return
        if "evaluate " not in raw and "loss at iteration" not in raw:
            return
        line = clean_line(raw)
        before = len(self.reader.evaluations)
        self.reader.feed(message_of(line) if line.startswith(("[", "(", " [")) else line, 0)
        if len(self.reader.evaluations) > before:
            self.evaluation(self.reader.evaluations[-1], now)

    def evaluation(self, found: EvaluationLine, now: float) -> None:
        if not found.in_loop:
            return
        self._write({"kind": "evaluation", "iteration": found.iteration, "loss": _json_float(found.loss),
                     "eval_seconds": found.eval_seconds, "unix_s": now})
        reason = self.stop_reason(found)
        if reason is not None and self.stopped is None:
            self.stop(reason)

    def stop_reason(self, found: EvaluationLine) -> str | None:
        """Why the run ends after this evaluation (a non-finite loss, the target reached), or None."""
        if not math.isfinite(found.loss):
            return f"eval loss at step {found.iteration} is {found.loss} (not finite): stopped"
        if self.stop_at_target and self.target_loss is not None and found.loss <= self.target_loss:
            return (f"eval loss {found.loss:.6g} at step {found.iteration} is at or below TARGET_LOSS="
                    f"{self.target_loss:g}: stopped at target")
        return None

    def stop(self, reason: str) -> None:
        """SIGTERM to one worker (Megatron's exit-signal handler makes every rank leave after the step)."""
        self.stopped = reason
        worker = find_worker(self.pid, self.script) if self.pid is not None else None
        note = {"kind": "stop", "reason": reason, "unix_s": time.time(), "signalled_pid": worker}
        if worker is None:
            note["problem"] = f"no worker process running {self.script} found: the run goes on to TRAIN_ITERS"
        else:
            try:
                os.kill(worker, signal.SIGTERM)
            except OSError as exc:
                note["problem"] = f"SIGTERM to worker {worker} failed: {exc}"
        self._write(note)
        print(f"tprimat: {reason}; SIGTERM to worker {worker}" if "problem" not in note
              else f"tprimat: {reason}; {note['problem']}", flush=True)

    def _write(self, entry: dict[str, Any]) -> None:
        with contextlib.suppress(OSError), open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def watcher_for(cfg: Config, plan: LaunchPlan, log_path: Path | None) -> TargetWatch | None:
    """The watcher of a job that evaluates and prints Megatron's lines (``plan.stop_script``), else None."""
    if plan.stop_script is None or not cfg.evaluates or log_path is None:
        return None
    return TargetWatch(record_path(log_path), plan.stop_script, cfg.target_loss, cfg.stop_at_target)
