"""Issue 33, family 2: foreign text never reaches a terminal or a report raw (``utils/io/sanitise.py``).

A fixture of hostile strings goes into every field the probe named (a result's ``model_shape.display_name``,
``gpu_info.device_name`` and ``error``, a prescreen's ``device_name`` and ``warnings``, a log file's name in
folder mode, the regression gate's report) and through every renderer: compare (console and ``compare.md``),
validate, gpu_check (console and ``gpu_check.md``), extract's folder table, the HTML page (``report.html``).
Nothing a terminal or a Markdown viewer acts on may come out.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from evaluate.compare import main as compare_main
from evaluate.gpu_check.cli import main as gpu_check_main
from evaluate.validate import main as validate_main
from tests.helpers.devices import h100
from tests.helpers.evaluate import make_result
from tests.helpers.paths import FIXTURES
from utils.io.sanitise import one_line, safe_text, sanitised
from utils.machine import prescreen as ps
from utils.machine.device_facts import Fact

HOSTILE = {
    "clear-screen": "\x1b[2J\x1b[H",
    "window-title": "\x1b]0;owned\x07",
    "forged-heading": "x\n# FORGED VERDICT: ready\n",
    "carriage-return": "ok\rFORGED",
    "c1-csi": "\x9b2J",
    "bidi-override": "\u202eevil",
    "line-separator": "a\u2028# FORGED",
    "lone-surrogate": "\ud800",
    "markup": "<script>alert(1)</script><img src=x onerror=alert(1)>",
}
ALL = "".join(HOSTILE.values())
# What must never come out: raw escapes and controls, a forged heading at a line start, bidi, lone surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _clean(text: str) -> None:
    assert not RAW.search(text), repr(RAW.search(text).group())
    assert not re.search(r"^\s*#+ FORGED", text, re.MULTILINE), "a forged heading"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_two_steps_leave_nothing_raw(name: str) -> None:
    value = HOSTILE[name]
    _clean(one_line(value))
    assert "\n" not in one_line(value) and "\r" not in one_line(value)
    _clean(safe_text(f"line one\n{value}\nline three").replace("\n# FORGED", "\n\\# FORGED"))


def _hostile_result(out: Path, platform: str, framework: str, status: str = "ok") -> Path:
    def mutate(result):
        result.model_shape.display_name = "Llama" + ALL
        result.gpu_info.device_name = (result.gpu_info.device_name or "") + ALL
        if status != "ok":
            result.error = "log line: " + ALL

    return make_result(out, platform, framework, status=status, mutate=mutate)


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "out"
    _hostile_result(out, "nvd", "tran")
    _hostile_result(out, "amd", "tran")
    _hostile_result(out, "nvd", "mega", status="failed")
    return out


def test_compare_console_and_report(hostile_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compare_main(["--results-dir", str(hostile_dir), "--allow-mismatch"])
    captured = capsys.readouterr()
    _clean(captured.out)
    _clean(captured.err)
    _clean((hostile_dir / "compare.md").read_text())


def test_report_page(hostile_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evaluate.report_html.cli import main as page_main

    gate = tmp_path / "gate.json"  # foreign text that reaches the page outside the result loader
    gate.write_text(json.dumps({"verdict": "fail" + ALL, "exit_code": 1, "error": "e" + ALL, "candidates": [
        {"candidate": "c" + ALL, "checks": [{"metric": "throughput" + ALL, "result": "fail", "line": ALL}]}]}))
    page = tmp_path / "report.html"
    assert page_main(["--results-dir", str(hostile_dir), "--db", "off", "--gate-report", str(gate),
                      "--output", str(page)]) == 0
    captured = capsys.readouterr()
    _clean(captured.out)
    _clean(captured.err)
    text = page.read_text()
    _clean(text)
    assert "\\x1b[2J" in text and "\\u202eevil" in text  # shown as their escapes, never dropped
    # no markup of the fixture's own: its tags shown as text, escaped (the page's own script is no <script>alert)
    assert "<script>alert" not in text and "<img src=x" not in text, "unescaped markup from a result"
    assert "&lt;script&gt;alert(1)" in text


def test_validate(hostile_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    validate_main([str(hostile_dir)])
    captured = capsys.readouterr()
    _clean(captured.out)
    _clean(captured.err)


def test_gpu_check_console_and_report(tmp_path: Path) -> None:
    out = tmp_path / "check"
    _hostile_result(out, "nvd", "tran")
    record = ps.prescreen("nvd", h100(), {"model": Fact(value="NVIDIA H100 80GB HBM3"),
                                          "ecc_enabled": Fact(reason="fixture: not read")})
    data = json.loads(record.model_dump_json())
    data["device_name"] += ALL
    data["warnings"] = ["slow" + ALL]
    prescreen = tmp_path / "prescreen.json"
    prescreen.write_text(json.dumps(data))
    said: list[str] = []
    gpu_check_main(["--results-dir", str(out), "--platform", "nvd", "--model", "llama", "--prescreen",
                    str(prescreen), "--out-dir", str(tmp_path), "--frameworks", "tran"], say=said.append)
    _clean("\n".join(said))
    _clean((tmp_path / "gpu_check.md").read_text())


def test_extract_folder_table_with_a_hostile_log_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evaluate.extract import main as extract_main

    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(FIXTURES / "logs" / "megatron_core012_llama.log", folder / "run\x1b[2J\n# FORGED.log")
    extract_main([str(folder), "--platform", "nvd", "--output-dir", str(tmp_path / "out")])
    captured = capsys.readouterr()
    _clean(captured.out)
    _clean(captured.err)


def test_a_sanitised_record_is_the_same_object_when_clean(tmp_path: Path) -> None:
    from utils.result.file import read_result

    result = read_result(make_result(tmp_path, "nvd", "tran"))
    assert sanitised(result) is result
