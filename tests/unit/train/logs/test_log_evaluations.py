"""Evaluation lines in Megatron, Primus and NeMo formats (issue 34): read from a log as EvaluationLine records.

The Megatron lines are those of ``megatron/training/training.py:2672-2700`` and ``megatron/core/timers.py:318-335``
at MEGATRON_REF 847781764f, as the stand-in tests/fakes/megatron_lm/pretrain_gpt.py prints them; the NeMo lines
those of NeMo 2.3's ``progress_printer.py:55-63, 170-183``.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.helpers.paths import FAKES
from train.logs.patterns import eval_timer_seconds, parse_evaluation
from train.logs.scan import merge_scans, scan_lines

ITERATION = (" [2026-11-27 08:00:0{s}] iteration {i:8d}/      40 | consumed samples: {c:12d} | elapsed time per "
             "iteration (ms): 512.0 | learning rate: 1.000000E-04 | global batch size:     8 | lm loss: 6.5E+00 |"
             " loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:"
             "   0 |")
TIMER = ["(min, max) time across ranks (ms):", "    evaluate " + "." * 39 + ": (1180.25, 1234.50)"]


def validation(prefix: str, value: str, ppl: str = "1.234568E+02") -> list[str]:
    line = f" validation loss at {prefix} | lm loss value: {value} | lm loss PPL: {ppl} | "
    return ["-" * (len(line) + 1), line, "-" * (len(line) + 1)]


def megatron_log() -> list[str]:
    lines: list[str] = []
    for i in range(1, 5):
        lines.append(ITERATION.format(s=i, i=i, c=8 * i))
        if i % 2 == 0:
            lines += TIMER + validation(f"iteration {i}", f"{7.0 - i / 4:.6E}")
    lines += validation("iteration 4 on validation set", "5.900000E+00")
    lines += validation("iteration 4 on test set", "5.950000E+00")
    return [line + "\n" for line in lines]


def test_megatron_validation_lines_with_their_timer() -> None:
    scan = scan_lines(megatron_log())
    assert [(e.iteration, e.kind) for e in scan.evaluations] == [
        (2, "in-loop"), (4, "in-loop"), (4, "after training"), (4, "test")]
    first = scan.evaluations[0]
    assert first.loss == pytest.approx(6.5) and first.perplexity == pytest.approx(123.4568)
    assert first.key == "lm loss" and first.eval_seconds == pytest.approx(1.2345)  # the slowest rank, in seconds
    assert scan.evaluations[2].eval_seconds is None  # no timer printed before it
    assert len(scan.iterations) == 4  # the validation lines are no iteration lines


def test_non_finite_values_and_several_validation_sets() -> None:
    nan = parse_evaluation(" validation loss at iteration 6 | lm loss value: NAN | lm loss PPL: 4.851652E+08 | ", 3)
    assert nan is not None and math.isnan(nan.loss) and nan.line_no == 3
    inf = parse_evaluation(" validation-1 loss at iteration 6 | lm loss value: INF | lm loss PPL: INF | ", 1)
    assert inf is not None and math.isinf(inf.loss) and inf.validation_set == 1
    assert parse_evaluation("the validation loss at iteration 6 was fine", 1) is None
    assert eval_timer_seconds("    evaluate ....: 250.00") == pytest.approx(0.25)  # --timing-log-option max
    assert eval_timer_seconds("    evaluate-time ....: (1.00, 2.00)") is None


def test_primus_debug_log_lines_behind_loguru_and_torchrun_prefixes() -> None:
    prefix = "[default7]:[20261127 08:00:00][tprimat/tprimat][pre_trainer][ip-10][rank-7/8][DEBUG] [--training.py:9] : "
    lines = [prefix + line + "\n" for line in megatron_log()]
    scan = scan_lines(lines)
    assert [e.iteration for e in scan.evaluations if e.in_loop] == [2, 4]
    assert scan.evaluations[1].eval_seconds == pytest.approx(1.2345) and scan.framework_hint == "prim"


def test_nemo_val_loss_after_a_validation_block() -> None:
    train = "Training epoch 0, iteration {i}/39 | lr: 0.0001 | reduced_train_loss: 6.5 | train_step_timing in s: 0.5"
    lines = [train.format(i=0), "Sanity checking Validation: iteration 1/2", train.format(i=1),
             "Validation: iteration 1/2", "Validation: iteration 2/2", train.format(i=2) + " | val_loss: 6.123",
             train.format(i=3) + " | val_loss: 6.123", "Validation: iteration 1/2", "Validation: iteration 2/2",
             train.format(i=4) + " | val_loss: nan"]
    scan = scan_lines([line + "\n" for line in lines])
    # the printer's iteration i (0-based) is step i+1; the validation ran after step i
    assert [(e.iteration, e.log_format) for e in scan.evaluations] == [(2, "nemo (ProgressPrinter)"),
                                                                        (4, "nemo (ProgressPrinter)")]
    assert scan.evaluations[0].loss == pytest.approx(6.123) and math.isnan(scan.evaluations[1].loss)


def test_merged_ranks_take_the_evaluations_of_the_last_rank() -> None:
    last = scan_lines(megatron_log())
    first = scan_lines([ITERATION.format(s=1, i=1, c=8) + "\n"])
    assert len(merge_scans([first, last]).evaluations) == 4


def test_the_stand_in_megatron_prints_what_the_scan_reads() -> None:
    proc = subprocess.run(
        [sys.executable, str(FAKES / "megatron_lm" / "pretrain_gpt.py"), "--train-iters", "4", "--eval-iters", "2",
         "--eval-interval", "2", "--global-batch-size", "8", "--valid-data-path", "/v"],
        # 1 ms steps: a step under 100 us is dropped as implausible (utils/measure/plausible.py).
        capture_output=True, text=True, timeout=60, env={"TPRIMAT_FAKE_STEP_S": "0.001", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    scan = scan_lines(proc.stdout.splitlines(keepends=True))
    assert [(e.iteration, e.kind) for e in scan.evaluations] == [(2, "in-loop"), (4, "in-loop"),
                                                                 (4, "after training")]
    assert [r.iteration for r in scan.iterations] == [1, 2, 3, 4]
    assert scan.evaluations[0].loss == pytest.approx(6.4) and scan.evaluations[0].eval_seconds == pytest.approx(0.001)
