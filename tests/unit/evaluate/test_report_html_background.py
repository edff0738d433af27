"""The page's history part read by a second process (evaluate/report_html/background.py) is the one read here.

The child is there for time only (it imports SQLAlchemy while the page's process imports matplotlib): what it
answers must be what :func:`evaluate.report_html.database.read_history` reads in one process, a child that ends
without an answer must be replaced by the same read here, and the page's own process must load no SQLAlchemy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.compare import build_comparison
from evaluate.history.ingest import add_paths
from evaluate.history.store import open_database
from evaluate.report import Comparison
from evaluate.report_html.background import HistoryReader
from evaluate.report_html.database import HistoryFacts, history_request, read_history
from tests.helpers.evaluate import make_result
from tests.helpers.report_page import make_page_results

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Results and a database holding an older run of one of their jobs, and them."""
    work = tmp_path_factory.mktemp("background")
    results = make_page_results(work / "results")

    def older_run(result):  # type: ignore[no-untyped-def]
        result.gpu_info.driver_version = "older-driver"
        result.started_at = "2026-01-01T00:00:00+00:00"
        result.finished_at = "2026-01-01T01:00:00+00:00"

    make_result(work / "older", "nvd", "mega", seed=5, step_time=2.2, mutate=older_run)
    db_path = work / "history.sqlite"
    with open_database(str(db_path), create=True) as db:
        assert not add_paths(db, [work / "older", results])[1]
    return results, db_path


def _comparison(results: Path) -> Comparison:
    comparison = build_comparison(results, True, {})
    assert comparison is not None
    return comparison


def _shown(facts: HistoryFacts) -> dict[str, object]:
    """What the page shows of ``facts`` (the trend figure's presence: its SVG ids are random)."""
    return {"absent": facts.absent, "runs": facts.runs, "figure": facts.trend_svg is not None,
            "series": [(s.key, s.ids.tolist(), s.times.tolist(), s.statuses.tolist(), s.values.tolist(), s.changes)
                       for s in facts.series],
            "changes": [(c.label, c.previous, c.facts, c.metrics) for c in facts.changes]}


def test_the_child_answers_what_this_process_reads(stored: tuple[Path, Path]) -> None:
    results, db_path = stored
    comparison = _comparison(results)
    here = read_history(str(db_path), comparison)
    assert here.absent is None and here.series and here.trend_svg is not None
    assert any(c.previous is not None and c.metrics for c in here.changes), "an earlier run of nvd/mega is stored"
    reader = HistoryReader()
    assert reader.forked, "a single-threaded process forks"
    reader.ask(history_request(str(db_path), comparison))
    assert _shown(reader.answer()) == _shown(here)
    assert not reader.forked, "the child is ended once it answered"


def test_a_child_without_an_answer_is_replaced_by_a_read_here(stored: tuple[Path, Path]) -> None:
    results, db_path = stored
    comparison = _comparison(results)
    reader = HistoryReader()
    assert reader._process is not None
    reader._process.kill()
    reader._process.join()
    reader.ask(history_request(str(db_path), comparison))
    assert _shown(reader.answer()) == _shown(read_history(str(db_path), comparison))


def test_reading_here_and_an_unused_child_are_alike(stored: tuple[Path, Path]) -> None:
    results, _ = stored
    comparison = _comparison(results)
    here = HistoryReader(fork=False)
    assert not here.forked
    here.ask(history_request("off", comparison))
    assert here.answer().absent == "the results database is off (HISTORY_DB=off): no history, no trend"
    unused = HistoryReader()  # --help, bad usage or no results: closed without a request
    unused.close()
    unused.close()
    assert not unused.forked


def test_the_page_process_loads_no_sqlalchemy(stored: tuple[Path, Path], tmp_path: Path) -> None:
    """SQLAlchemy's import (0.35 s) and the queries are the child's; the page's process draws the trend it gets."""
    results, db_path = stored
    page = tmp_path / "report.html"
    code = ("import json, sys\nfrom evaluate.report_html.cli import main\n"
            f"code = main(['--results-dir', {str(results)!r}, '--db', {str(db_path)!r}, '--output', {str(page)!r}])\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] == 'sqlalchemy')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code_, loaded = json.loads(done.stdout.splitlines()[-1])
    assert code_ == 0 and loaded == []
    text = page.read_text()
    assert "run(s) in the results database" in text and "dotted lines mark runs whose versions changed" in text
    assert "nvd/mega llama against run #1" in text and "older-driver" in text
