"""bench/startup.py: its figures are whole child processes with their command, and a launcher's own lines are
time-stamped (the preflight line, the line that starts the framework); none is asserted as a speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import startup
from tests.helpers.paths import REPO


def test_quick_imports_report_each_child_with_its_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "startup.json"
    assert startup.main(["--parts", "imports", "--quick", "--workload", "env", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    assert [r["command"] for r in rows] == ["python -c pass", "python -m utils.config.load --get OUTPUT_DIR"]
    assert all(r["exit_code"] == 0 and r["wall_s"] > 0 and len(r["load_before"]) == 3 for r in rows)
    assert any(line.startswith("| imports | interpreter alone |") for line in lines)
    written = json.loads(out.read_text())
    assert written["cores"] and len(written["figures"]) == 2


def test_a_launchers_lines_are_time_stamped_as_they_come(tmp_path: Path) -> None:
    script = ("import time; print('tprimat: preflight of cpu/tran/llama ...', flush=True); time.sleep(0.3); "
              "print('tprimat: cpu/tran/llama: torchrun ...', flush=True); raise SystemExit(3)")
    figure = startup.run_child("launch", "fake", [sys.executable, "-c", script], tmp_path, {},
                               {"preflight": startup.PREFLIGHT_LINE, "framework": "tprimat: cpu/tran/llama: "})
    assert figure.exit_code == 3 and figure.notes == ["exit 3: tprimat: cpu/tran/llama: torchrun ..."]
    assert figure.to_preflight_s is not None and figure.to_framework_s >= figure.to_preflight_s + 0.25
    assert figure.command.startswith("python -c ")
    assert "| launch | fake |" in startup.table([figure])


def test_a_path_that_is_no_checkout_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert startup.main(["--repo", str(tmp_path), "--parts", "imports", "--quick"]) == 2
    assert "is not a tprimat checkout" in capsys.readouterr().err
    assert (REPO / "bench" / "startup.py").exists()
