"""Stand-in entry point: a tiny training loop that prints Megatron-LM's log lines (tests only).

The preflight only checks that this file exists. Run (``python pretrain_gpt.py <flags>``, or under
torchrun), it plays a run of ``--train-iters`` steps: an iteration line per step, and with
``--eval-iters`` > 0 and ``--eval-interval`` an evaluation after every ``eval_interval``-th step, printed
with the format strings of Megatron-LM at MEGATRON_REF (847781764f), cited per line below. With
``--exit-signal-handler`` a SIGTERM sets a flag and the run leaves after the current step with exit code 0,
printing Megatron's exit line (its ``checkpoint_and_decide_exit``); without it SIGTERM ends the process.

Knobs (environment): ``TPRIMAT_FAKE_EVAL_LOSSES`` the k-th evaluation's loss (comma list, ``nan`` allowed;
default 8 x 0.8^k), ``TPRIMAT_FAKE_STEP_S`` seconds per step (default 0.02), ``TPRIMAT_FAKE_SIGNAL_WAIT_S`` how long
an evaluation waits for a SIGTERM before its step ends (default 0; a test sets it so that a loaded host's launcher
still stops the run at the step of the evaluation it reads, as it does when a real step takes seconds);
``TPRIMAT_FAKE_SIGNAL_AT`` and ``TPRIMAT_FAKE_WATCH_RECORD`` shorten that wait at the other evaluations
(:func:`_read_by_watcher`). Nothing here is upstream code.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path


def _flags(argv: list[str]) -> dict[str, str | bool]:
    flags: dict[str, str | bool] = {}
    for index, word in enumerate(argv):
        if word.startswith("--"):
            following = argv[index + 1] if index + 1 < len(argv) else "--"
            flags[word[2:].replace("-", "_")] = True if following.startswith("--") else following
    return flags


def _read_by_watcher(k: int) -> Callable[[], bool]:
    """Whether the wait after the k-th evaluation may end before a SIGTERM: never, unless the test names the one
    evaluation it expects the stop at (``TPRIMAT_FAKE_SIGNAL_AT``) and the watcher's record
    (``TPRIMAT_FAKE_WATCH_RECORD``); then any other evaluation waits only until the watcher has recorded it.

    Why: the launcher's watcher records an evaluation before it decides to stop (train/launch/target_watch.py), so
    a stop it sent there by mistake still arrives within this step or the next, while an evaluation it passes costs
    no idle wait.
    """
    at, record = os.environ.get("TPRIMAT_FAKE_SIGNAL_AT", ""), os.environ.get("TPRIMAT_FAKE_WATCH_RECORD", "")
    if not at or not record or int(at) == k:
        return lambda: False

    def recorded() -> bool:
        try:
            lines = Path(record).read_text(encoding="utf-8").splitlines()
        except OSError:
            return False
        kinds = []
        for line in lines:
            with contextlib.suppress(ValueError):  # a line the watcher is still writing
                kinds.append(json.loads(line).get("kind"))
        return kinds.count("evaluation") >= k

    return recorded


def _eval_loss(k: int) -> float:
    listed = [w for w in os.environ.get("TPRIMAT_FAKE_EVAL_LOSSES", "").split(",") if w.strip()]
    return float(listed[min(k, len(listed)) - 1]) if listed else 8.0 * 0.8 ** k


def _print(text: str) -> None:
    print(text, flush=True)  # Megatron's print_rank_last/print_rank_0 print with flush=True


def _iteration_line(iteration: int, train_iters: int, gbs: int, ms: float, loss: float) -> str:
    # megatron/training/training.py:1573-1628 at 847781764f (training_log), the fields tprimat reads
    return (f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"
            f" iteration {iteration:8d}/{train_iters:8d} | consumed samples: {iteration * gbs:12d} |"
            f" elapsed time per iteration (ms): {ms:.1f} | learning rate: {1e-4:.6E} | global batch size: {gbs:5d} |"
            f" lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 |"
            f" number of nan iterations:   0 |")


def _evaluation(prefix: str, loss: float, seconds: float) -> None:
    # megatron/core/timers.py:318-335 (timers.log(['evaluate']), training.py:2602), then
    # megatron/training/training.py:2672-2700 (evaluate_and_print_results): the line between two rules of dashes
    _print("(min, max) time across ranks (ms):")
    _print("    {}: ({:.2f}, {:.2f})".format("evaluate ".ljust(48, "."), seconds * 900.0, seconds * 1000.0))
    line = f" validation loss at {prefix} | "
    line += "{} value: {:.6E} | ".format("lm loss", loss)
    line += "{} PPL: {:.6E} | ".format("lm loss", math.exp(min(20, loss)))
    _print("-" * (len(line) + 1))
    _print(line)
    _print("-" * (len(line) + 1))


def main(argv: list[str]) -> int:
    flags = _flags(argv)
    train_iters = int(flags.get("train_iters", 10))
    gbs = int(flags.get("global_batch_size", 1))
    eval_iters, eval_interval = int(flags.get("eval_iters", 0)), int(flags.get("eval_interval", 0))
    evaluates = eval_iters > 0 and eval_interval > 0 and "valid_data_path" in flags
    step_s = float(os.environ.get("TPRIMAT_FAKE_STEP_S", "0.02"))
    received: list[int] = []
    if flags.get("exit_signal_handler"):  # megatron/training/dist_signal_handler.py:51-82: only a flag is set
        signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    evaluations = 0
    for iteration in range(1, train_iters + 1):
        time.sleep(step_s)
        _print(_iteration_line(iteration, train_iters, gbs, step_s * 1000.0, 9.0 - iteration * 0.01))
        if evaluates and iteration % eval_interval == 0:  # training.py:2356, never at iteration 0
            evaluations += 1
            time.sleep(step_s)
            _evaluation(f"iteration {iteration}", _eval_loss(evaluations), step_s)
            deadline = time.monotonic() + float(os.environ.get("TPRIMAT_FAKE_SIGNAL_WAIT_S", "0"))
            read = _read_by_watcher(evaluations)
            while flags.get("exit_signal_handler") and not received and time.monotonic() < deadline and not read():
                time.sleep(0.005)
        if received:  # training.py:1830-1845 (checkpoint_and_decide_exit), then sys.exit(0) (l.2441-2449)
            _print(f"[exiting program after receiving SIGTERM.] datetime: "
                   f"{datetime.now().strftime('%Y-%m-%d %H:%M:%S')} ")
            return 0
    if evaluates:  # training.py:773-787: once more after the loop, on the next validation samples
        _evaluation(f"iteration {train_iters} on validation set", _eval_loss(evaluations + 1), step_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
