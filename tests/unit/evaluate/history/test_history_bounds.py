"""Every number and selector of the history CLI and the gate is bounded before it reaches SQLite or a message, and a
broken password secret costs the page its history part only (issue 49, family 5: ``evaluate/history/query.py``
``run_ids``/``tag_name``, ``evaluate/history/cli.py``'s argument types, ``evaluate/history/target.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate.report_html.cli import main as page_main
from tests.helpers.evaluate import make_result
from tests.helpers.history import cli, results

Capture = pytest.CaptureFixture[str]
HUGE = "9" * 40  # more than SQLite's 64-bit and PostgreSQL's 32-bit integers


@pytest.fixture
def db(tmp_path: Path, capsys: Capture) -> str:
    path = str(tmp_path / "history.sqlite")
    assert cli(capsys, "add", "--db", path, *map(str, results(tmp_path / "out", 2))).returncode == 0
    return path


def _refused(done, *words: str) -> str:  # type: ignore[no-untyped-def]
    """The error line of a refusal: exit 2, no traceback, bounded."""
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert len(line) < 400 and all(word in line for word in words), line
    return line


@pytest.mark.parametrize("args", [["list", "--limit", v] for v in ("nan", "inf", "0", "-1", HUGE)]
                         + [["list", "--lock-timeout", v] for v in ("nan", "inf", "-1", "1e300")]
                         + [["trend", "--last", v] for v in ("nan", "0", HUGE)])
def test_limits_and_timeouts_are_finite_and_in_range(args: list[str], db: str, capsys: Capture) -> None:
    _refused(cli(capsys, *args, "--db", db), args[1])


@pytest.mark.parametrize("selector", [HUGE, f"1,{HUGE}", "0", ",".join(map(str, range(1, 1_500)))])
def test_a_run_id_out_of_range_is_one_line(selector: str, db: str, tmp_path: Path, capsys: Capture) -> None:
    for args in (["diff", selector, "1"], ["tag", selector, "x"], ["list", "--tag", "x"]):
        done = cli(capsys, *args, "--db", db)
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr and len(done.stderr) < 400
    _refused(cli(capsys, "--db", db, "--candidate", str(tmp_path / "out"), "--baseline", selector,
                 module="evaluate.gate"))


def test_missing_ids_are_named_in_a_bounded_line(db: str, capsys: Capture) -> None:
    line = _refused(cli(capsys, "diff", ",".join(map(str, range(1, 1_000))), "1", "--db", db), "no run with id")
    assert "and 987 more" in line


def test_a_tag_longer_than_its_column_is_one_line(db: str, capsys: Capture) -> None:
    _refused(cli(capsys, "tag", "1", "t" * 100_000, "--db", db), "at most 200")
    _refused(cli(capsys, "diff", "tag:" + "t" * 100_000, "1", "--db", db), "at most 200")


def test_a_broken_password_secret_costs_the_page_its_history_part_only(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega")
    (out / "gate.json").write_text(json.dumps({"verdict": "pass", "checks": 5}))  # forged: absent, page kept
    monkeypatch.setenv("HISTORY_DB_PASSWORD", "line\nbreak")
    assert page_main(["--results-dir", str(out), "--db", "postgresql://u@127.0.0.1:9/h"]) == 0
    text = (out / "report.html").read_text()
    assert "the results database cannot be used" in text and "line\nbreak" not in text
    assert "the gate report gate.json is not evaluate.gate" in text
