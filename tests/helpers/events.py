"""TensorBoard event files in the shapes the frameworks write, made with the tensorboard package's own writer.

Megatron-LM's scalars (``simple_value``, the iteration as step) and its arguments as text summaries
(``<arg>/text_summary``, plugin ``text``); Lightning's ``TensorBoardLogger`` scalars under NeMo 2 (the
0-based global step as step). The shapes are the ones train/logs/tensorboard.py reads; the step times and
losses are tests/fixtures/logs/generate_foreign.py's, so a test can compute what a result must hold.
"""

from __future__ import annotations

from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from tests.fixtures.logs.generate_foreign import loss, step_ms

START = 1_750_000_000.0
ARGS = {"seq_length": 4096, "micro_batch_size": 2, "global_batch_size": 128, "num_layers": 32, "hidden_size": 4096,
        "ffn_hidden_size": 14336, "num_attention_heads": 32, "num_query_groups": 8, "group_query_attention": True,
        "swiglu": True, "add_qkv_bias": False, "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1,
        "context_parallel_size": 1, "data_parallel_size": 4, "world_size": 8, "bf16": True, "fp16": False,
        "fp8": None, "lr": 0.00015, "train_iters": 20, "seed": 1234}


def text_value(tag: str, text: str) -> Summary.Value:
    """One argument as Megatron-LM writes it: a text summary under ``<tag>/text_summary``."""
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(dtype="DT_STRING", string_val=[text.encode()],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary.Value(tag=f"{tag}/text_summary", metadata=metadata, tensor=tensor)


def write_events(directory: Path, events: list[Event]) -> Path:
    """``events`` into one new event file in ``directory``; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(directory))
    for event in events:
        writer.add_event(event)
    writer.close()
    (path,) = [p for p in directory.iterdir() if p.name.startswith("events.out.tfevents")]
    return path


def scalar_event(step: int, wall: float, values: dict[str, float]) -> Event:
    """One event of ``simple_value`` scalars at ``step``."""
    return Event(wall_time=wall, step=step,
                 summary=Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]))


def write_megatron_events(directory: Path, steps: int = 20, timers: bool = True) -> Path:
    """Megatron-LM's --tensorboard-dir: arguments as text at start, then per-iteration scalars."""
    events = [Event(wall_time=START, step=0, summary=Summary(value=[text_value(k, str(v)) for k, v in ARGS.items()]))]
    wall = START
    for i in range(1, steps + 1):
        wall += step_ms(i) / 1000
        scalars = {"learning-rate": 1e-4, "learning-rate vs samples": 1e-4, "batch-size": 128.0, "lm loss": loss(i)}
        if timers:
            scalars["iteration-time"] = step_ms(i) / 1000
        events.append(scalar_event(i, wall, scalars))
    return write_events(directory, events)


def write_lightning_events(directory: Path, steps: int = 30, every: int = 1) -> Path:
    """NeMo 2 through Lightning's TensorBoardLogger: global step 0..n-1, logged every ``every`` steps."""
    events = []
    for step in range(every - 1, steps, every):
        events.append(scalar_event(step, START + step, {
            "reduced_train_loss": loss(step + 1), "lr": 3e-4, "global_batch_size": 256.0,
            "consumed_samples": 256.0 * (step + 1), "global_step": float(step), "epoch": 0.0,
            "train_step_timing in s": step_ms(step + 1) / 1000}))
    return write_events(directory, events)
