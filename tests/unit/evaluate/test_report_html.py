"""``python -m evaluate.report_html``: the page's content, its escaping and its absent parts (no browser here).

The page is read as text: the verdict and the headline ratio first, one section per model, failed runs shown and
never averaged in, every foreign string escaped (a forged ``device_name``/``error`` holding ``<script>``), no
script element at all, no absolute path of the results folder, and one line for each part that is absent (no
database, no gate report, evaluation off). The browser's view is tests/unit/evaluate/test_report_html_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluate.analysis.comparison import build_comparison
from evaluate.history.ingest import add_paths
from evaluate.history.store import open_database
from evaluate.report_html.cli import main
from evaluate.report_html.markup import Markup, el, esc, link, table
from tests.helpers.evaluate import make_result
from tests.helpers.report_page import HOSTILE, TARGET_LOSS, labels, make_page_results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_page_results(tmp_path_factory.mktemp("page") / "results")


@pytest.fixture(scope="module")
def page(results: Path) -> str:
    assert main(["--results-dir", str(results), "--db", "off"]) == 0
    return (results / "report.html").read_text()


def test_markup_escapes_every_foreign_text() -> None:
    assert esc(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    # and makes it inert first (utils/io/sanitise.py): a database row or a stored label reaches esc unsanitised
    assert esc("\x1b]8;;x\x07a\x9bb\u202ec\ud800") == "\\x1b]8;;x\\x07a\\x9bb\\u202ec\\ud800"
    assert el("td", HOSTILE, title='"><b>') == ('<td title="&quot;&gt;&lt;b&gt;">'
                                                "&lt;script&gt;alert(1)&lt;/script&gt;</td>")
    assert el("td", Markup("<b>trusted</b>")) == "<td><b>trusted</b></td>"
    assert link("javascript:alert(1)") == '<a href="javascript%3Aalert%281%29">javascript:alert(1)</a>'
    assert '<td class="num">1,234.5 [1,200.0, 1,260.1]</td>' in table(["x"], [["1,234.5 [1,200.0, 1,260.1]"]])


def test_the_page_starts_with_the_verdict_and_the_headline_ratio(page: str) -> None:
    body = page[page.index("<body>"):]
    assert body.index("Verdict: ") < body.index("Llama 3.1 8B</h2>") < body.index(">Fairness</h2>") \
        < body.index(">History</h2>") < body.index(">Evidence</h2>")
    verdict = body[body.index('id="verdict"'):body.index("</section>")]
    assert ">FAIR<" in verdict
    assert re.search(r"tokens/s/GPU = \d\.\d{3}x \[95% \d\.\d{3}, \d\.\d{3}\]", verdict)
    assert "AMD / NVIDIA, identical configuration" in verdict


def test_hostile_strings_are_text_and_there_is_no_script(page: str, results: Path) -> None:
    assert "<script" not in page.lower() and "onerror=" not in page.replace("onerror=alert(2)", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt; &quot;quoted&quot; &amp; &#x27;single&#x27;" in page
    assert "default-src &#x27;none&#x27;" in page  # the CSP: even an escaping slip would run nothing
    assert str(results) not in page and str(results.resolve()) not in page


def test_every_run_is_shown_and_failed_runs_are_not_averaged_in(page: str, results: Path) -> None:
    for label in labels(results):
        assert f">{label}</a>" in page, label
    assert f'href="train_{labels(results)[0]}.json"' in page
    assert "Runs not counted (failed or incomplete)" in page and "1 failed" in page
    assert "train_nvd_deep_llama.json" in page
    comparison = build_comparison(results, allow_mismatch=False, prices={})
    summaries = [s for groups in comparison.by_model.values() for s in groups]
    for summary in summaries:  # each figure is of the group's ok runs only: the failed run enters none
        ok = [run for run in summary.group.runs if run.status == "ok"]
        assert len(summary.per_run_tokens_per_gpu) == len(ok), summary.group.label
    deep = next(s for s in summaries if s.group.framework == "deep")
    assert deep.tokens_per_gpu is None and deep.final_loss is None


def test_time_to_quality_is_shown_where_runs_evaluated(page: str) -> None:
    quality = page[page.index(">Time to quality</h3>"):page.index("</section>", page.index(">Time to quality</h3>"))]
    assert f">{TARGET_LOSS:g}</td>" in quality and "yes" in quality and "GPU-hours to target" in quality
    assert "n/a (not measured in a test)" in quality  # a null figure to target says why
    # evaluate/render/quality_plot.py's drawing (one owner with quality.png): against time and tokens, the target dashed
    assert "Eval loss against wall-clock time" in quality and "Eval loss against training tokens" in quality
    assert "target 3.5" in quality
    assert page.count("<svg") == 2  # the model's figure and the eval-loss figure; no panel without data
    assert "board power per GPU" in page and "750 W [750, 750]" in page


def test_absent_parts_are_one_line_each(tmp_path: Path) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", with_power=False)
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    text = (out / "report.html").read_text()
    assert "the results database is off (HISTORY_DB=off)" in text
    assert "no regression-gate report" in text
    assert "Time to quality: evaluation off (EVAL_INTERVAL=0)" in text
    assert "one completed group" in text and text.count("<svg") == 1
    assert "Energy: not measured" in text and "Tokens per kWh (board energy, higher is better): left out" in text


def test_a_python_without_sqlalchemy_still_gets_its_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lent GPU's native Python had no SQLAlchemy and the page crashed after a good check (2026-11-27)."""
    import builtins
    import sys

    real_import = builtins.__import__

    def no_sqlalchemy(name: str, *args: object, **kwargs: object) -> object:
        if name == "sqlalchemy" or name.startswith("sqlalchemy."):
            raise ModuleNotFoundError("No module named 'sqlalchemy'")
        return real_import(name, *args, **kwargs)

    for name in [n for n in sys.modules if n.startswith(("sqlalchemy", "evaluate.history", "evaluate.report_html"))]:
        monkeypatch.delitem(sys.modules, name)  # the page's modules are imported again, without SQLAlchemy
    monkeypatch.setattr(builtins, "__import__", no_sqlalchemy)
    from evaluate.report_html.cli import main as main_without_sqlalchemy

    out = tmp_path / "results"
    make_result(out, "nvd", "mega", with_power=False)
    assert main_without_sqlalchemy(["--results-dir", str(out), "--db", str(tmp_path / "history.sqlite")]) == 0
    text = (out / "report.html").read_text()
    assert "the results database cannot be read here: No module named" in text and "sqlalchemy" in text


def test_history_gate_and_what_changed(results: Path, tmp_path: Path) -> None:
    older = tmp_path / "older"

    def other_driver(result):  # type: ignore[no-untyped-def]
        result.gpu_info.driver_version = "older-driver"
        result.started_at = "2026-01-01T00:00:00+00:00"
        result.finished_at = "2026-01-01T01:00:00+00:00"

    make_result(older, "nvd", "mega", seed=5, step_time=2.2, mutate=other_driver)
    db_path = tmp_path / "history.sqlite"
    with open_database(str(db_path), create=True) as db:
        assert not add_paths(db, [older, results])[1]
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"verdict": "regression", "exit_code": 1, "error": None, "candidates": [
        {"candidate": f"{results}/train_nvd_mega_llama_r1.json", "run_id": None, "baseline_run_ids": [1],
         "checks": [{"metric": "throughput", "result": "fail", "line": HOSTILE}]}]}))
    out = tmp_path / "page.html"
    assert main(["--results-dir", str(results), "--db", str(db_path), "--gate-report", str(gate),
                 "--output", str(out)]) == 0
    text = out.read_text()
    assert "run(s) in the results database" in text and "dotted lines mark runs whose versions changed" in text
    assert text.count("<svg") == 3  # the model figure, its eval-loss figure and the trend, all inline SVG
    assert "nvd/mega llama against run #1" in text and "driver.driver_version" in text and "older-driver" in text
    assert "<strong>regression</strong>" in text and "&lt;script&gt;alert(1)" in text
    assert str(results) not in text and str(tmp_path) not in text
    assert 'href="../' in text and '/results/train_nvd_mega_llama_r1.json"' in text  # relative to the page


def test_only_failed_runs_give_no_verdict_and_no_figure(tmp_path: Path) -> None:
    out = tmp_path / "results"
    make_result(out, "nvd", "mega", status="failed")
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    text = (out / "report.html").read_text()
    assert "NO VERDICT (no completed run to compare)" in text and ">FAIR<" not in text
    assert "No figure: no run of this model completed." in text and "<svg" not in text and "left out" not in text


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--results-dir", str(tmp_path), "--db", "off"]) == 2
    assert "nothing to show" in capsys.readouterr().err
    assert main(["--results-dir", str(tmp_path / "missing"), "--db", "off"]) == 2
    with pytest.raises(SystemExit) as stop:
        main(["--results-dir", str(tmp_path), "--convergence-band", "2"])
    assert stop.value.code == 2


def test_a_differing_setting_is_explained_by_its_rule(tmp_path: Path) -> None:
    """The "why it matters" column is the setting's rule's (train/settings/rules.json), not a guess from its name."""
    from evaluate.report_html.sections import why
    from train.settings.rules import SETTINGS, WHY
    from utils.schema.run import EffectiveSettings

    assert all(why(rule.key) == WHY[rule.why] for rule in SETTINGS)
    assert why("num_workers") == WHY["communication"] and why("apply_rope_fusion") == WHY["kernel"]
    assert why("no_such_setting_fusion") == WHY["configuration"]  # outside the table: the general reason

    def workers(count: int):  # type: ignore[no-untyped-def]
        def mutate(result):  # type: ignore[no-untyped-def]
            result.effective_settings = EffectiveSettings(settings={"num_workers": count}, env={}, resolved_by="test")
        return mutate

    out = tmp_path / "results"
    make_result(out, "nvd", "mega", seed=1, mutate=workers(2))
    make_result(out, "amd", "mega", seed=2, mutate=workers(8))
    assert main(["--results-dir", str(out), "--db", "off"]) == 0
    text = (out / "report.html").read_text()
    assert "<td>num_workers</td>" in text and WHY["communication"] in text


def test_a_gate_report_of_another_shape_is_refused_in_one_line(tmp_path: Path) -> None:
    """The page reads the gate's report through its typed model (evaluate/history/gate_report.py), strictly."""
    from evaluate.report_html.facts import read_gate

    gate = tmp_path / "gate.json"
    for forged in ({"verdict": "pass", "exit_code": "0"}, {"verdict": "pass", "exit_code": 0, "candidates": [
            {"candidate": "c", "checks": [{"metric": "m", "result": "maybe", "line": "x"}]}]}, ["not", "a", "report"]):
        gate.write_text(json.dumps(forged))
        facts = read_gate(gate, tmp_path)
        assert facts.report is None and facts.absent == "the gate report gate.json is not evaluate.gate's report"
    gate.write_text(json.dumps({"verdict": "pass", "exit_code": 0, "error": None, "candidates": []}))
    assert read_gate(gate, tmp_path).report.verdict == "pass"  # type: ignore[union-attr]
