"""TensorBoard event files become results through the same assembly as logs.

The files are written by tests/helpers/events.py with the tensorboard package's own ``EventFileWriter``,
in the shapes the frameworks write (train/logs/tensorboard.py): Megatron-LM's scalars (``simple_value``,
the iteration as step) and its arguments as text summaries (``<arg>/text_summary``, plugin ``text``); Lightning's
``TensorBoardLogger`` scalars under NeMo 2 (the 0-based global step as step).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.fixtures.logs.generate_foreign import LLAMA, flops_per_token, loss, step_ms
from tests.helpers.events import START, scalar_event, write_events, write_lightning_events, write_megatron_events
from train.logs.analyse import AnalysisOptions, analyse_files
from train.logs.scan import LogInputError
from train.logs.tensorboard import scan_events
from utils.result.file import read_result, write_result
from utils.schema.model import Result


def analyse(tmp_path: Path, files: list[Path], **options: object) -> Result:
    result = analyse_files(files, AnalysisOptions(**options)).result  # type: ignore[arg-type]
    return read_result(write_result(tmp_path / "result.json", result))


def test_megatron_events_with_arguments_give_the_full_workload(tmp_path: Path) -> None:
    events = write_megatron_events(tmp_path / "tb")
    result = analyse(tmp_path, [events], platform="nvd", gpu_name="NVIDIA H100 80GB HBM3")
    assert result.source.kind == "tensorboard" and result.source.format == "megatron-lm tensorboard"
    assert result.source.files[0].path == str(events.resolve()) and result.source.files[0].sha256
    assert (result.status, result.framework, result.model) == ("ok", "mega", "llama")
    w = result.training_config.workload
    assert (w.GBS, w.SL, w.MBS, w.DP, w.GA, w.TP, w.WORLD_SIZE, w.TRAIN_ITERS) == (128, 4096, 2, 4, 16, 2, 8, 20)
    assert result.step_times == pytest.approx([step_ms(i) / 1000 for i in range(1, 21)])
    assert result.loss_values == pytest.approx([loss(i) for i in range(1, 21)])
    median = statistics.median(step_ms(i) / 1000 for i in range(3, 21))
    perf = result.performance_metrics
    assert perf.tokens_per_second == pytest.approx(128 * 4096 / median)
    assert perf.mfu.full == pytest.approx(128 * 4096 / median / 8 * flops_per_token(LLAMA, 4096) / 989.4e12)
    assert any("scalar tags in the event file(s): batch-size, iteration-time, learning-rate" in w
               for w in result.warnings)


def test_megatron_events_without_timers_use_wall_clock_differences(tmp_path: Path) -> None:
    events = write_megatron_events(tmp_path / "tb", timers=False)
    result = analyse(tmp_path, [events], platform="nvd")
    assert "wall-clock" in result.source.format
    assert result.first_step == 2  # the first logged step has no earlier event to measure from
    assert result.step_times == pytest.approx([step_ms(i) / 1000 for i in range(2, 21)], rel=1e-6)
    assert any("no 'iteration-time' tag" in w for w in result.warnings)


def test_lightning_events_are_one_based_and_every_kth_step_is_a_sample(tmp_path: Path) -> None:
    events = write_lightning_events(tmp_path / "version_0", steps=50, every=5)
    result = analyse(tmp_path, [events], model="llama")
    assert (result.framework, result.platform, result.source.format) == ("nemo", "nvd", "nemo/lightning tensorboard")
    assert (result.first_step, result.step_interval, len(result.step_times)) == (5, 5, 10)
    assert result.step_times[0] == pytest.approx(step_ms(5) / 1000)
    w = result.training_config.workload
    assert w.GBS == 256 and w.TRAIN_ITERS is None and "TRAIN_ITERS" in w.unknown and w.WORLD_SIZE is None
    perf = result.performance_metrics
    assert perf.total_time_seconds is None and "only every 5th step" in perf.total_time_basis
    assert result.status == "ok"  # the total is not known, so nothing says the run stopped early


def test_the_tags_a_file_holds_are_checked(tmp_path: Path) -> None:
    other = write_events(tmp_path / "other", [scalar_event(1, START, {"accuracy": 0.5, "val/loss": 1.0})])
    with pytest.raises(LogInputError, match=r"no Megatron-LM or Lightning/NeMo training scalars .*accuracy, val/loss"):
        scan_events([other])


def test_a_restarted_writer_keeps_the_first_value_of_a_step(tmp_path: Path) -> None:
    first = write_megatron_events(tmp_path / "tb", steps=12)
    again = [scalar_event(i, START + 1000 + i, {"iteration-time": 99.0, "lm loss": 1.0, "batch-size": 128.0,
                                             "learning-rate": 1e-4}) for i in range(10, 21)]
    second = write_events(tmp_path / "restart", again)
    moved = first.parent / (second.name + ".b")
    second.rename(moved)
    scan = scan_events([first, moved])
    times = {r.iteration: r.step_time_s for r in scan.iterations}
    assert times[10] == pytest.approx(step_ms(10) / 1000) and times[20] == 99.0
