"""A result file is foreign input (issue 26): read strictly, bounded, never a crash, never a write outside its folder.

Each case is a file a colleague's ``output.zip`` could hold. validate marks it INVALID with one line naming the
file and its first problem; compare skips it, says how many it skipped, and compares the others; no name built
from it leaves the output folder.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evaluate.compare import main as compare_main
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from tests.helpers.paths import FIXTURES
from utils.io.json_input import JsonInputError, nesting_depth, read_json
from utils.io.output_path import OutputPathError, output_file, safe_label
from utils.result.file import ResultError, read_result, result_path

BROKEN = "train_nvd_mega_llama.json"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    make_result(folder, "amd", "prim", seed=1)
    make_result(folder, "nvd", "nemo", seed=2)
    return folder


def _good(out: Path) -> dict[str, Any]:
    return json.loads((out / "train_amd_prim_llama.json").read_text())


def _edited(out: Path, edit: Callable[[dict[str, Any]], Any]) -> str:
    data = copy.deepcopy(_good(out))
    edit(data)
    return json.dumps(data)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        for part in parents:
            data = data[part]
        data[last] = value
    return edit


def _v1(edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def both(data: dict[str, Any]) -> None:
        data["schema_version"] = 1
        edit(data)
    return both


# name -> (the file's text from the good result's JSON, a fragment of the one-line problem)
PATHOLOGICAL: dict[str, tuple[Callable[[Path], str], str]] = {
    "number-as-string": (lambda o: _edited(o, _set("performance_metrics/tokens_per_second", "8456")),
                         "performance_metrics/tokens_per_second: Input should be a valid number"),
    "bool-as-count": (lambda o: _edited(o, _set("run_index", True)), "run_index: Input should be a valid integer"),
    "nan-string": (lambda o: _edited(o, lambda d: d.update(loss_values=["NaN"] * len(d["loss_values"]))),
                   "loss_values/0: Input should be a valid number"),
    "nan-literal": (lambda o: _edited(o, _set("performance_metrics/tokens_per_second", 1.0)).replace(
        '"tokens_per_second": 1.0', '"tokens_per_second": NaN'),
                    "performance_metrics/tokens_per_second: Input should be a finite number"),
    "deep-list": (lambda o: "[" * 100_000 + "]" * 100_000, "nested 100000 levels deep, over the limit of 64"),
    "deep-object": (lambda o: '{"a":' * 50_000 + "1" + "}" * 50_000, "nested 50000 levels deep"),
    "many-digits": (lambda o: _edited(o, _set("run_index", 7)).replace('"run_index": 7', '"run_index": ' + "9" * 9000),
                    "not usable JSON: Exceeds the limit"),
    "huge-count": (lambda o: _edited(o, lambda d: (d["training_config"].update(sequence_length=10**300),
                                                   d["training_config"]["workload"].update(SL=10**300))),
                   "training_config/sequence_length: Input should be less than or equal to"),
    "huge-loss": (lambda o: _edited(o, lambda d: d.update(loss_values=[1e308] * len(d["loss_values"]))),
                  "loss_values/0: Input should be less than or equal to"),
    "block-is-list": (lambda o: _edited(o, _set("performance_metrics", [1, 2])), "performance_metrics: Input should"),
    "top-level-list": (lambda o: "[1, 2, 3]", "a result is a JSON object, not list"),
    "v1-block-is-list": (lambda o: _edited(o, _v1(_set("performance_metrics", [1, 2]))),
                         "schema version 1 file cannot be migrated: performance_metrics is a JSON list"),
    "v1-block-is-text": (lambda o: _edited(o, _v1(_set("gpu_info", "x"))),
                         "schema version 1 file cannot be migrated: gpu_info is a JSON str"),
    "key-with-newline": (lambda o: _edited(o, _set("evil\nINJECTED", 1)), "evil\\nINJECTED: Extra inputs"),
    "not-utf8": (lambda o: "\udcff", "not UTF-8 text"),
    "platform-escape": (lambda o: _edited(o, _set("platform", "y/" + "../" * 30 + "tmp/ESCAPED3")),
                        "platform: Value error, 'y/../../"),
    "platform-newline": (lambda o: _edited(o, _set("platform", "cpu\nINJECT")),
                         "platform: Value error, 'cpu\\nINJECT' is not a platform tprimat knows (amd, nvd, cpu)"),
    "model-path": (lambda o: _edited(o, _set("model", "../../etc/passwd")),
                   "'../../etc/passwd' is not a model tprimat knows (llama, qwen, mistral)"),
    "framework-unknown": (lambda o: _edited(o, _set("framework", "megatron")), "is not a framework tprimat knows"),
}


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("case", sorted(PATHOLOGICAL))
def test_a_pathological_result_is_invalid_in_one_line(out: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    make, problem = PATHOLOGICAL[case]
    broken = out / BROKEN
    _write(broken, make(out))
    with pytest.raises(ResultError) as info:
        read_result(broken)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(broken)) and problem in message, message

    code = validate_main([str(out)])
    stdout = capsys.readouterr().out
    assert code == 1
    assert any(line.startswith(BROKEN) and "INVALID" in line for line in stdout.splitlines()), stdout
    assert f"ERROR   {BROKEN}: {message}" in stdout.splitlines()
    assert "train_amd_prim_llama.json" in stdout and "Traceback" not in stdout


def test_compare_skips_the_pathological_counts_them_and_compares_the_rest(
        out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = []
    for index, case in enumerate(sorted(PATHOLOGICAL)):
        name = f"train_cpu_tran_qwen_r{index + 1}.json"
        _write(out / name, PATHOLOGICAL[case][0](out))
        names.append(name)
    elsewhere = tmp_path / "O"
    code = compare_main(["--results-dir", str(out), "--output-dir", str(elsewhere)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"compare: skipped {len(names)} of {len(names) + 2} result file(s); comparing the other 2" in err
    for name in names:
        assert f"warning: skipping {out / name}: {out / name}: " in err
    report = (elsewhere / "compare.md").read_text()
    assert "AMD Primus" in report and "NVIDIA NeMo" in report
    assert "passwd" not in report.split("Skipped")[0] if "Skipped" in report else "passwd" not in report
    written = {p.name for p in elsewhere.iterdir()}
    assert written <= {".tprimat", "compare.png", "compare.md", "loss_parity.png", "compare_amd_frameworks.png",
                       "compare_nvd_frameworks.png"}, written
    assert not list(Path("/tmp").glob("ESCAPED3*")), "nothing written outside the output folder"


def test_a_result_file_name_with_a_line_break_stays_one_line(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = out / "train_nvd_mega_llama\nINJECTED.json"
    _write(odd, _edited(out, _set("performance_metrics/tokens_per_second", "8456")))
    assert validate_main([str(out)]) == 1
    stdout = capsys.readouterr().out
    assert not any(line.startswith("INJECTED") for line in stdout.splitlines())
    assert "train_nvd_mega_llama\\nINJECTED.json" in stdout


def test_json_limits_refuse_size_and_depth_before_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 1000 + "1]")
    with pytest.raises(JsonInputError, match="over the 100-byte limit"):
        read_json(big, max_bytes=100)
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}') == 3, "brackets inside strings do not count"
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(JsonInputError, match="not a regular file"):
        read_json(tmp_path / "fifo.json")  # never blocks on a FIFO
    assert read_json(big) == [1] * 1001
    big.write_text('{"a": NaN}')
    with pytest.raises(JsonInputError, match="NaN is not a JSON number"):
        read_json(big)


def test_a_version_1_result_still_reads() -> None:
    fixtures = FIXTURES / "results_v1"
    for path in sorted(fixtures.glob("*.json")):
        assert read_result(path).schema_version == 2, path


# ---------------------------------------------------------------------------
# where writes go


@pytest.mark.parametrize("name", ["../x.png", "a/../../x", "/tmp/x.png", ".hidden", "a\nb.png", "", "sub/../x",
                                  "compare_y/../../tmp/ESCAPED3_frameworks.png"])
def test_output_file_refuses_names_that_leave_the_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputPathError):
        output_file(tmp_path, name)


def test_output_file_refuses_a_link_that_leads_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "compare.md").symlink_to(outside / "compare.md")
    (folder / "logs").symlink_to(outside, target_is_directory=True)
    for name in ("compare.md", "logs/train_cpu_tran_llama.log"):
        with pytest.raises(OutputPathError, match="leads outside"):
            output_file(folder, name)
    assert output_file(folder, "generated/train_x.yaml") == folder / "generated" / "train_x.yaml"


def test_labels_and_result_names_come_from_safe_parts(tmp_path: Path) -> None:
    assert safe_label("../../etc/pass wd\n") == "_etc_pass_wd_"
    assert safe_label("...") == "_" and safe_label("") == "x"
    assert result_path(tmp_path, "cpu", "tran", "llama", 2, "tuned") == tmp_path / "train_cpu_tran_llama_tuned_r2.json"
    for bad in ({"platform": "y/../../tmp/E"}, {"framework": "tran\n"}, {"model": "../../etc/passwd"}):
        args = {"platform": "cpu", "framework": "tran", "model": "llama", **bad}
        with pytest.raises(ValueError, match="tprimat knows"):
            result_path(tmp_path, **args)
