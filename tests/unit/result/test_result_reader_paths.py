"""utils/result/file.py: ``read_result`` reads in one step (pydantic parses and validates the text) and takes the long
way (``json``, then the model) only for a file the one step refuses. The one step must accept nothing the long way
refuses and read every figure the same, or a forged file would get through, or a figure change, by the path taken.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.evaluate import make_result
from tests.helpers.paths import FIXTURES
from utils.io.json_input import read_json_text
from utils.io.sanitise import one_line
from utils.result import file as result_file
from utils.result.file import ResultError, read_result, read_the_long_way
from utils.schema.model import RESULT_LIMITS


def _outcome(read: Callable[[], object]) -> tuple[str, str]:
    try:
        value = read()
    except ResultError as exc:
        return "refused", str(exc)
    return "read", value.model_dump_json()  # type: ignore[attr-defined]


def _both(path: Path) -> tuple[tuple[str, str], tuple[str, str]]:
    """What ``read_result`` gives, and what the long way alone gives, for the same file."""
    def long_way() -> object:
        text = read_json_text(path, max_bytes=RESULT_LIMITS.max_bytes, max_values=RESULT_LIMITS.max_values,
                              max_containers=RESULT_LIMITS.max_containers)
        return read_the_long_way(text, one_line(path, 400))
    return _outcome(lambda: read_result(path)), _outcome(long_way)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reader") / "output"
    return make_result(out, "nvd", "mega", "llama", run_index=2, loss_offset=0.125)


def test_a_valid_result_is_read_in_one_step(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(result_file, "read_the_long_way", lambda *a: pytest.fail("took the long way"))
    assert read_result(good).run_index == 2


def test_each_kind_of_result_reads_the_same_both_ways(tmp_path: Path) -> None:
    out = tmp_path / "output"
    paths = [make_result(out, "amd", "prim", "qwen", step_time=1.234567890123, loss_offset=1e-17),
             make_result(out, "cpu", "tran", "mistral", status="failed", with_power=False),
             make_result(out, "nvd", "nemo", "llama", PROFILE="tuned"),
             make_result(out, "amd", "mega", "llama",
                         mutate=lambda r: setattr(r.gpu_info, "device_name", "\x1b]0;x\x07\u202e\ud7ff"))]
    paths += sorted((FIXTURES / "results_v1").glob("*.json"))  # version 1: the one step refuses, the long way migrates
    for path in paths:
        fast, slow = _both(path)
        assert fast == slow and fast[0] == "read", path


# Edits of a valid file, each as text: what the long way refuses must be refused with its message, what it reads
# must be read alike.
EDITS: dict[str, Callable[[str], str]] = {
    "a number as a string": lambda t: t.replace('"run_index": 2', '"run_index": "2"'),
    "a float for an int": lambda t: t.replace('"run_index": 2', '"run_index": 2.0'),
    "a bool for an int": lambda t: t.replace('"run_index": 2', '"run_index": true'),
    "an unknown key": lambda t: t.replace('"run_index": 2', '"run_index": 2, "forged": 1'),
    "a repeated key": lambda t: t.replace('"run_index": 2', '"run_index": 2, "run_index": 3'),
    "a repeated key, the second bad": lambda t: t.replace('"run_index": 2', '"run_index": 2, "run_index": "3"'),
    "NaN": lambda t: t.replace('"run_index": 2', '"run_index": NaN'),
    "a lone surrogate": lambda t: t.replace('"status": "ok"', '"status": "ok", "error": "\\ud800"'),
    "a raw control character": lambda t: t.replace('"status": "ok"', '"status": "ok", "error": "a\tb"'),
    "trailing data": lambda t: t + " {}",
    "a byte order mark": lambda t: "\ufeff" + t,
    "a number of 5,000 digits": lambda t: t.replace('"run_index": 2', '"run_index": ' + "9" * 5000),
    "an exponent for an int": lambda t: t.replace('"run_index": 2', '"run_index": 2e0'),
    "a huge float": lambda t: t.replace('"run_index": 2', '"run_index": 2, "schema_version": 2e400'),
    "a list at the top": lambda t: "[" + t + "]",
    "version 1 claimed": lambda t: t.replace('"schema_version": 2', '"schema_version": 1'),
    "a negative zero": lambda t: t.replace('"run_index": 2', '"run_index": -0'),
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edited_file_gets_the_long_ways_answer(good: Path, tmp_path: Path, edit: str) -> None:
    text = good.read_text(encoding="utf-8")
    changed = EDITS[edit](text)
    assert changed != text, "the edit found nothing to change"
    path = tmp_path / good.name
    path.write_text(changed, encoding="utf-8")
    fast, slow = _both(path)
    assert fast == slow


def test_every_figure_survives_the_one_step(good: Path) -> None:
    """Each number in the file is the number read: the two parsers agree to the last bit."""
    text = good.read_text(encoding="utf-8")
    assert json.loads(read_result(good).model_dump_json()) == json.loads(read_the_long_way(text, "x")
                                                                          .model_dump_json())
