"""The page's work done by forked children (evaluate/report_html/background.py) is the work done here.

The children are there for time only (one imports SQLAlchemy while the page's process imports matplotlib, one
draws every other model's section): what they answer must be what this process makes alone, a child that ends
without an answer must be replaced by the same work here, and the page's own process must load no SQLAlchemy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import matplotlib
import pytest

from evaluate.analysis.comparison import Comparison, build_comparison
from evaluate.history.ingest import add_paths
from evaluate.history.store import open_database
from evaluate.report_html import background
from evaluate.report_html.background import HistoryReader, InChild
from evaluate.report_html.cli import main
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


# Set in the fresh process: there a thread left by an earlier test starts a fresh process for the test that meets it,
# not one more for them all.
FRESH = "TPRIMAT_TEST_FRESH_RUN"


def _run_fresh(names: list[str]) -> dict[str, object]:
    """Run these tests of this module in a fresh pytest process: the names that passed there, and its output."""
    threads = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-n", "0",
                           *(f"{Path(__file__).resolve()}::{name}" for name in names)], cwd=ROOT,
                          env={**os.environ, FRESH: "1"}, capture_output=True, text=True, timeout=600, check=False)
    passed = {line.rsplit("::", 1)[1] for line in done.stdout.splitlines() if line.startswith("PASSED ")}
    return {"passed": passed, "threads": threads, "output": done.stdout[-3000:]}


@pytest.fixture(scope="module")
def fresh_run(request: pytest.FixtureRequest) -> dict[str, object]:
    """This module's tests that use ``alone`` (those this session runs), run together once in a fresh pytest process.

    One process for all of them, not one each: each fresh process costs pytest's start, the page's imports and
    ``stored`` again (about 3 s of CPU).
    """
    return _run_fresh([item.name for item in request.session.items
                       if item.path == Path(__file__) and "alone" in getattr(item, "fixturenames", ())])


@pytest.fixture
def alone(request: pytest.FixtureRequest) -> bool:
    """True when this test already ran, and passed, in a fresh pytest process without other threads.

    background.py forks only a process that runs no other thread (a fork copies none, and may copy a lock one held).
    A page's process has none; a pytest worker may, left by an earlier test, and then the forking tests run again
    where the condition holds instead of testing the fallback twice: all together in one fresh process
    (``fresh_run``), and one that meets a thread left there by an earlier one in a fresh process of its own.
    """
    if threading.active_count() == 1:
        return False
    fresh = _run_fresh([request.node.name]) if os.environ.get(FRESH) else request.getfixturevalue("fresh_run")
    assert request.node.name in fresh["passed"], \
        f"in a fresh process (this one runs {fresh['threads']}):\n{fresh['output']}"
    return True


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


def test_the_child_answers_what_this_process_reads(stored: tuple[Path, Path], alone: bool) -> None:
    if alone:
        return
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


def test_a_child_without_an_answer_is_replaced_by_a_read_here(stored: tuple[Path, Path], alone: bool) -> None:
    if alone:
        return
    results, db_path = stored
    comparison = _comparison(results)
    reader = HistoryReader()
    assert reader._child is not None
    reader._child[0].kill()
    reader._child[0].join()
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


def test_work_in_a_child_is_the_work_here(alone: bool) -> None:
    if alone:
        return
    child = InChild(lambda: ("pid", os.getpid()))
    assert child.forked
    assert child.result()[1] != os.getpid()
    assert InChild(lambda: os.getpid(), fork=False).result() == os.getpid()
    here = os.getpid()
    killed = InChild(lambda: time.sleep(60) if os.getpid() != here else here)  # the child answers nothing in time
    assert killed._child is not None
    killed._child[0].kill()
    assert killed.result() == os.getpid(), "a child that ends without a value: the work is done here"

    def fails() -> int:
        raise ValueError("the same error here")

    with pytest.raises(ValueError, match="the same error here"):
        InChild(fails).result()


def test_a_page_of_two_models_is_the_same_with_and_without_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     alone: bool) -> None:
    """The qwen section is drawn by a child (every other model's is); the page is byte for byte the one drawn here."""
    if alone:
        return
    forked: list[bool] = []
    real_fork = background._fork

    def counted_fork(target, fork):  # type: ignore[no-untyped-def]
        child = real_fork(target, fork)
        forked.append(child is not None)
        return child

    results = tmp_path / "results"
    for model in ("llama", "qwen"):
        for platform, framework in (("nvd", "mega"), ("amd", "prim")):
            make_result(results, platform, framework, model)
    monkeypatch.setitem(matplotlib.rcParams, "svg.hashsalt", "tprimat-test")  # SVG ids: else random per figure
    pages = []
    for fork in (True, False):
        monkeypatch.setattr(background, "_fork", counted_fork if fork else lambda target, fork: None)
        out = tmp_path / f"report-{fork}.html"
        assert main(["--results-dir", str(results), "--db", "off", "--output", str(out)]) == 0
        pages.append(out.read_bytes())
    assert forked == [True, True], "the first page had its two children: the database reader, the qwen section"
    assert pages[0] == pages[1]
    assert pages[0].count(b"<svg") == 2 and pages[0].index(b"Llama") < pages[0].index(b"Qwen")
