"""The report page in a real browser: headless Chromium opens ``report.html`` from disk (issue 37).

It must load with no console error and no network request, show the headline and every run's label, run no
script when a result holds ``<script>alert(1)</script>``, and render to a screenshot of a sensible size. A control
page that does request, log and run proves that the checks can fail. Chromium comes from the system packages
(``.ci/run`` installs it); without one the module skips saying so, except where ``TPRIMAT_REQUIRE_CHROMIUM=1``
(CI), where a missing browser fails. The browser starts once for the module (tests/helpers/browser.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluate.report_html.cli import main
from tests.helpers.browser import Browser, Visit, chromium
from tests.helpers.report_page import HOSTILE, labels, make_page_results

EXECUTABLE = chromium()
if EXECUTABLE is None:
    if os.environ.get("TPRIMAT_REQUIRE_CHROMIUM") == "1":
        pytest.fail("TPRIMAT_REQUIRE_CHROMIUM=1 and no Chromium on PATH (apt-get install chromium)",
                    pytrace=False)
    pytest.skip("no Chromium on PATH: apt-get install chromium (.ci/run installs it)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with Browser(EXECUTABLE, tmp_path_factory.mktemp("chromium-profile")) as opened:  # type: ignore[arg-type]
        yield opened


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = make_page_results(tmp_path_factory.mktemp("page") / "results")
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    return out


@pytest.fixture(scope="module")
def visit(browser: Browser, results: Path) -> Visit:
    return browser.visit(results / "report.html")


def test_the_page_loads_with_no_console_error_and_no_network_request(visit: Visit) -> None:
    assert visit.console == []
    assert visit.requests == []


def test_the_headline_and_every_run_are_on_the_rendered_page(visit: Visit, results: Path) -> None:
    assert "Verdict: FAIR" in visit.text
    assert "AMD / NVIDIA, identical configuration" in visit.text and "tokens/s/GPU = " in visit.text
    for label in labels(results):
        assert label in visit.text, label


def test_a_hostile_device_name_runs_no_script(visit: Visit) -> None:
    assert visit.scripts == 0 and visit.dialogs == []
    assert HOSTILE in visit.text  # shown as the text it is


def test_the_screenshot_is_a_whole_page(visit: Visit, results: Path) -> None:
    width, height = visit.screenshot_size
    assert width == 1400 and 2_000 < height < 20_000
    assert len(visit.screenshot) > 50_000  # figures and tables drawn, not a blank page
    (results / "report.png").write_bytes(visit.screenshot)


def test_the_checks_see_a_request_a_console_error_and_a_script(browser: Browser, tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><p>control</p><img src="http://127.0.0.1:9/x.png">'
                       '<script>console.error("seen")</script></body></html>')
    seen = browser.visit(control)
    assert seen.requests == ["http://127.0.0.1:9/x.png"]
    assert any("seen" in line for line in seen.console)
    assert seen.scripts == 1
