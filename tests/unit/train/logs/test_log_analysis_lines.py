"""The line formats log analysis reads: Megatron's arguments block, world-size lines, NeMo's printer, the header."""

from __future__ import annotations

import pytest

from tests.fixtures.logs.generate_foreign import arguments_block
from train.logs.arguments import ArgumentsReader, arg_bool, arg_float, arg_int, arg_text
from train.logs.patterns import (
    clean_line,
    launch_header,
    message_of,
    parse_iteration,
    parse_launch_header,
    world_line,
)
from train.logs.scan import scan_lines


def read(lines: list[str]) -> ArgumentsReader:
    reader = ArgumentsReader()
    for number, line in enumerate(lines, start=1):
        reader.feed(message_of(clean_line(line)), number)
    reader.finish()
    return reader


def test_arguments_block_values_as_printed() -> None:
    long_name = "a" * 50  # 48 or more characters: no dots, two spaces
    block = arguments_block({"seq_length": 4096, "lr": 3e-05, "fp8": None, "bf16": True,
                             "data_path": ["/d/x_text_document"], long_name: 7, "tokenizer_model": ""})
    assert f"  {long_name}  7" in block
    reader = read(block)
    assert reader.complete and not reader.warnings and reader.line_no == 1
    values = reader.values
    assert arg_int(values, "seq_length") == 4096 and arg_float(values, "lr") == 3e-05
    assert arg_text(values, "fp8") is None and arg_bool(values, "bf16") is True
    assert arg_text(values, "data_path") == "['/d/x_text_document']" and arg_int(values, long_name) == 7
    assert values["tokenizer_model"] == "" and arg_int(values, "absent") is None and arg_int(values, "lr") is None


def test_a_line_with_the_wrong_dot_count_is_not_an_argument() -> None:
    block = arguments_block({"seq_length": 4096})
    reader = read([block[0], "  warning ...... something another rank printed", *block[1:]])
    assert reader.values == {"seq_length": "4096"}
    assert any("1 line(s) inside the arguments block" in w for w in reader.warnings)


def test_primus_sink_prefix_and_torchrun_tags_are_taken_off() -> None:
    block = arguments_block({"micro_batch_size": 2})
    primus = [f"[20251201 10:00:00][u/t][pre_trainer][ip-1.2.3.4][rank-0/8][DEBUG] [------arguments.py:1197] : {x}"
              for x in block]
    assert read(primus).values == {"micro_batch_size": "2"}
    assert read([f"[default0]:{x}" for x in block]).values == {"micro_batch_size": "2"}


def test_a_cut_block_and_a_second_differing_block() -> None:
    first = arguments_block({"seq_length": 4096, "train_iters": 100})
    second = arguments_block({"seq_length": 8192, "train_iters": 100})
    reader = read([*first, *second])
    assert reader.values["seq_length"] == "4096" and reader.blocks == 2
    assert any("second arguments block" in w and "seq_length" in w for w in reader.warnings)
    cut = read(first[:-1])
    assert cut.values["train_iters"] == "100" and not cut.complete
    assert any("has no end line" in w for w in cut.warnings)


@pytest.mark.parametrize("line, sizes", [
    ("using world size: 8, data-parallel size: 4, context-parallel size: 1, hierarchical context-parallel sizes: "
     "Nonetensor-model-parallel size: 2, encoder-tensor-model-parallel size: 0, pipeline-model-parallel size: 1, "
     "encoder-pipeline-model-parallel size: 0",
     {"world_size": 8, "data_parallel_size": 4, "context_parallel_size": 1, "tensor_model_parallel_size": 2,
      "pipeline_model_parallel_size": 1}),
    ("using world size: 16, data-parallel size: 2, context-parallel size: 2, hierarchical context-parallel sizes: "
     "None, tensor-model-parallel size: 4, pipeline-model-parallel size: 1",
     {"world_size": 16, "data_parallel_size": 2, "context_parallel_size": 2, "tensor_model_parallel_size": 4,
      "pipeline_model_parallel_size": 1}),
    ("using world size: 16, data-parallel size: 16, tensor-model-parallel size: 1, pipeline-model-parallel size: 1",
     {"world_size": 16, "data_parallel_size": 16, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}),
])
def test_world_size_line_of_each_version(line: str, sizes: dict[str, int]) -> None:
    assert world_line(line) == sizes


def test_nemo_progress_printer_line() -> None:
    record = parse_iteration("Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | "
                             "global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | "
                             "train_step_timing in s: 0.03146", 7)
    assert (record.iteration, record.train_iters, record.line_no) == (121, 150, 7)
    assert (record.step_time_s, record.loss, record.learning_rate, record.global_batch_size) == (
        0.03146, 1.233, 3e-05, 1)
    assert parse_iteration("Validation: iteration 3/10", 1) is None


def test_launch_header_round_trip_and_world_sizes_in_a_scan() -> None:
    header = launch_header("amd", "prim", "qwen", 2, "sha256:" + "ab" * 32)
    assert parse_launch_header(header) == {"platform": "amd", "framework": "prim", "model": "qwen", "run_index": "2",
                                           "config": "sha256:" + "ab" * 32}
    assert parse_launch_header("tprimat: amd/prim/qwen: python3 -m ...") is None
    scan = scan_lines([header + "\n", "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/16\n",
                       "[20251201 10:00:00][rank-3/16][INFO ] [---trainer.py:812] : -world_size:        16\n"])
    assert scan.launch["model"] == "qwen" and scan.recognised
    assert scan.world_sizes == {"Lightning world size": 16, "Primus's [rank-r/N] prefix": 16,
                                "Primus's -world_size line": 16}


def test_merging_per_rank_scans_keeps_the_main_log_and_says_what_it_left_out() -> None:
    from pathlib import Path

    from train.logs.scan import merge_scans

    def lines(times: list[float]) -> list[str]:
        return [f" iteration {i:8d}/{3:8d} | elapsed time per iteration (ms): {t:.1f} | global batch size:    8 |\n"
                for i, t in enumerate(times, start=1)]

    main = scan_lines(lines([10.0, 11.0, 12.0]), source=Path("rank7.log"))
    same = scan_lines(lines([10.0, 11.0, 12.0]), source=Path("rank7_debug.log"))
    other = scan_lines(lines([50.0, 51.0]), source=Path("rank3.log"))
    oom = scan_lines(["torch.OutOfMemoryError: CUDA out of memory\n"], source=Path("rank1.log"))
    merged = merge_scans([oom, main, same, other])
    assert [r.step_time_s for r in merged.iterations] == [0.01, 0.011, 0.012]
    assert [p.kind for p in merged.problems] == ["out of memory"]
    left_out = [w for w in merged.warnings if "not used" in w]
    assert len(left_out) == 1 and left_out[0].startswith("rank3.log:")
