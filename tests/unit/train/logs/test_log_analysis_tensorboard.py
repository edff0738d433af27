"""TensorBoard event files become results through the same assembly as logs.

The files are written here with the tensorboard package's own ``EventFileWriter``, in the shapes the
frameworks write (shared FORMATS.md): Megatron-LM's scalars (``simple_value``, the iteration as step)
and its arguments as text summaries (``<arg>/text_summary``, plugin ``text``); Lightning's
``TensorBoardLogger`` scalars under NeMo 2 (the 0-based global step as step).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from tests.fixtures.logs.generate_foreign import LLAMA, flops_per_token, loss, step_ms
from train.logs.analyse import AnalysisOptions, analyse_files
from train.logs.scan import LogInputError
from train.logs.tensorboard import scan_events
from utils.result.file import read_result, write_result
from utils.result.model import Result

START = 1_750_000_000.0
ARGS = {"seq_length": 4096, "micro_batch_size": 2, "global_batch_size": 128, "num_layers": 32, "hidden_size": 4096,
        "ffn_hidden_size": 14336, "num_attention_heads": 32, "num_query_groups": 8, "group_query_attention": True,
        "swiglu": True, "add_qkv_bias": False, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
        "context_parallel_size": 1, "data_parallel_size": 4, "world_size": 8, "bf16": True, "fp16": False,
        "fp8": None, "lr": 0.00015, "train_iters": 20, "seed": 1234}


def _text(tag: str, text: str) -> Summary.Value:
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(dtype="DT_STRING", string_val=[text.encode()],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary.Value(tag=f"{tag}/text_summary", metadata=metadata, tensor=tensor)


def _write(directory: Path, events: list[Event]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for event in events:
        writer.add_event(event)
    writer.close()
    (path,) = [p for p in directory.iterdir() if p.name.startswith("events.out.tfevents")]
    return path


def _scalars(step: int, wall: float, values: dict[str, float]) -> Event:
    return Event(wall_time=wall, step=step,
                 summary=Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]))


def write_megatron_events(directory: Path, steps: int = 20, timers: bool = True) -> Path:
    """Megatron-LM's --tensorboard-dir: arguments as text at start, then per-iteration scalars."""
    events = [Event(wall_time=START, step=0, summary=Summary(value=[_text(k, str(v)) for k, v in ARGS.items()]))]
    wall = START
    for i in range(1, steps + 1):
        wall += step_ms(i) / 1000
        scalars = {"learning-rate": 1e-4, "learning-rate vs samples": 1e-4, "batch-size": 128.0, "lm loss": loss(i)}
        if timers:
            scalars["iteration-time"] = step_ms(i) / 1000
        events.append(_scalars(i, wall, scalars))
    return _write(directory, events)


def write_lightning_events(directory: Path, steps: int = 30, every: int = 1) -> Path:
    """NeMo 2 through Lightning's TensorBoardLogger: global step 0..n-1, logged every ``every`` steps."""
    events = []
    for step in range(every - 1, steps, every):
        events.append(_scalars(step, START + step, {
            "reduced_train_loss": loss(step + 1), "lr": 3e-4, "global_batch_size": 256.0,
            "consumed_samples": 256.0 * (step + 1), "global_step": float(step), "epoch": 0.0,
            "train_step_timing in s": step_ms(step + 1) / 1000}))
    return _write(directory, events)


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
    other = _write(tmp_path / "other", [_scalars(1, START, {"accuracy": 0.5, "val/loss": 1.0})])
    with pytest.raises(LogInputError, match=r"no Megatron-LM or Lightning/NeMo training scalars .*accuracy, val/loss"):
        scan_events([other])


def test_a_restarted_writer_keeps_the_first_value_of_a_step(tmp_path: Path) -> None:
    first = write_megatron_events(tmp_path / "tb", steps=12)
    again = [_scalars(i, START + 1000 + i, {"iteration-time": 99.0, "lm loss": 1.0, "batch-size": 128.0,
                                             "learning-rate": 1e-4}) for i in range(10, 21)]
    second = _write(tmp_path / "restart", again)
    moved = first.parent / (second.name + ".b")
    second.rename(moved)
    scan = scan_events([first, moved])
    times = {r.iteration: r.step_time_s for r in scan.iterations}
    assert times[10] == pytest.approx(step_ms(10) / 1000) and times[20] == 99.0
