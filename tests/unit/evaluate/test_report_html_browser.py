"""The report page in a real browser: headless Chromium, driven by Playwright, opens ``report.html`` from disk.

It must load with no console error and no network request, show the headline and every run's label, run no
script when a result holds ``<script>alert(1)</script>``, and render to a screenshot of a sensible size. A control
page that does request, log and run proves that the checks can fail (issue 37). Chromium is the system package's
(``.ci/run`` installs it; Playwright downloads no browser of its own), started once for the module with a fresh
profile. Without it the module skips saying so; under CI (``CI=true`` or ``TPRIMAT_REQUIRE_CHROMIUM=1``) it fails.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, sync_playwright

from evaluate.mlperf.cli import main as import_main
from evaluate.report_html.cli import main
from tests.helpers.mlperf import SAMPLE
from tests.helpers.report_page import HOSTILE, labels, make_page_results
from tests.helpers.required import require

EXECUTABLE = shutil.which("chromium") or shutil.which("chromium-browser")
require(None if EXECUTABLE else "no Chromium on PATH: apt-get install chromium (.ci/run installs it)",
        "TPRIMAT_REQUIRE_CHROMIUM")
# What a headless browser on a bare VM or container needs: no sandbox (root), no GPU, and nothing fetched.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
REPORTED = ("error", "warning", "assert")


@dataclass
class Visit:
    """What opening a page showed: its text, console errors and warnings, requests beyond the page, a screenshot."""

    text: str
    scripts: int
    screenshot: bytes
    console: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    @property
    def screenshot_size(self) -> tuple[int, int]:
        """(width, height) from the PNG's IHDR chunk."""
        assert self.screenshot[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
        return struct.unpack(">II", self.screenshot[16:24])


def open_page(browser: BrowserContext, page_file: Path) -> Visit:
    """Open ``page_file`` in a new tab, wait for its load event, read what it showed, take a full-page screenshot."""
    url = page_file.resolve().as_uri()
    console: list[str] = []
    requests: list[str] = []
    dialogs: list[str] = []
    page = browser.new_page()

    def on_console(message: ConsoleMessage) -> None:
        if message.type in REPORTED:
            console.append(message.text[:300])

    page.on("console", on_console)
    page.on("pageerror", lambda error: console.append(str(error)[:300]))
    page.on("request", lambda request: requests.append(request.url)
            if request.url != url and not request.url.startswith("data:") else None)
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url, wait_until="load")
    visit = Visit(page.evaluate("document.body.innerText"), page.evaluate("document.scripts.length"),
                  page.screenshot(full_page=True), console, requests, dialogs)
    page.close()
    return visit


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=EXECUTABLE, headless=True, args=FLAGS, viewport={"width": 1400, "height": 1000},
            env={"HOME": str(profile)})  # its NSS database and caches stay out of the real home
        yield context
        context.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = make_page_results(tmp_path_factory.mktemp("page") / "results")
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    return out


@pytest.fixture(scope="module")
def visit(browser: BrowserContext, results: Path) -> Visit:
    return open_page(browser, results / "report.html")


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


def test_the_checks_see_a_request_a_console_error_and_a_script(browser: BrowserContext, tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><p>control</p><img src="http://127.0.0.1:9/x.png">'
                       '<script>console.error("seen")</script></body></html>')
    seen = open_page(browser, control)
    assert seen.requests == ["http://127.0.0.1:9/x.png"]
    assert any("seen" in line for line in seen.console)
    assert seen.scripts == 1


def test_the_quickstart_page_ends_with_mlperfs_published_runs(browser: BrowserContext, tmp_path: Path) -> None:
    """As shell/quickstart.sh builds it (issue 48): the carried MLPerf v5.1 sample imported beside the results, then the
    page; its last section is the AMD-against-NVIDIA answer from published runs, with its tables, and nothing runs."""
    out = make_page_results(tmp_path / "results")
    assert import_main(["import", str(SAMPLE), "--output-dir", str(out)]) == 0
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    visit = open_page(browser, out / "report.html")
    assert visit.console == [] and visit.requests == [] and visit.scripts == 0
    assert "Verdict: FAIR" in visit.text  # the user's own comparison is unchanged by the published runs beside it
    page = browser.new_page()
    page.goto((out / "report.html").resolve().as_uri(), wait_until="load")
    last = page.evaluate("Array.from(document.querySelectorAll('body > section')).pop().innerText")
    page.close()
    assert last.startswith("AMD vs NVIDIA: MLPerf Training v5.1, Llama 3.1 8B (published runs, imported)")
    for part in ("Time to train, AMD / NVIDIA at equal GPU count", "The recipes of each pair",
                 "Same chip, different submitters", "Scaling: time to train against GPUs", "Every system",
                 "AMD MI355X_EPYC_9575F_pytorch", "Supermicro AS-4126GS-NBR-LCC", "99.7085"):
        assert part in last, part
