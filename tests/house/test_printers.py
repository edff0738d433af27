"""Every printer of foreign text, walked with one hostile corpus: nothing a terminal, a Markdown viewer or a browser
acts on comes out, and nothing unbounded (issue 49: one printer for foreign text, ``utils/io/sanitise.py``).

The corpus (:data:`CORPUS`) goes into every field of a result, a database row, a log name, an MLLOG, a gate report,
config.env and the environment that some printer shows: escape sequences (ESC, OSC), C1 controls, bidirectional
overrides, CR and LF with a forged heading, ``<script>`` and ``<img onerror>``, a lone surrogate and a million
characters. Each entry of :data:`PRINTERS` runs one printer as a user runs it (its CLI's ``main`` in this process)
and returns what it wrote: the console, compare.md, report.html, the history CLI, the gate, config errors, the dry
run, the MLPerf import, gpu_check and extract. :func:`leaks` says what came out raw.

Two tests keep the walk honest: with the sanitiser's escaping switched off, every printer leaks (so the corpus does
reach each one, and the sanitiser is what stands in its way), and a planted bypass (a run label printed raw, as
``history diff`` once did) is caught.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.devices import h100
from tests.helpers.evaluate import make_result
from tests.helpers.mlperf import SAMPLE
from tests.helpers.paths import FIXTURES
from tests.helpers.proc import main_in_process
from utils.io.sanitise import LINE_CHARS
from utils.schema.run import EffectiveSettings

SHORT = ("\x1b]0;owned\x07\x1b[2J\x9b2J\x85\u202eevil\u2066ok\rFORGED\n# FORGED VERDICT: ready\n"
         "<script>alert(1)</script><img src=x onerror=alert(1)>\ud800")
CORPUS = SHORT + "A" * 1_000_000
# What an environment variable or a config value can carry: no lone surrogate (and, where said, no C0 control).
TEXT = CORPUS.replace("\ud800", "")
PRINTABLE = re.sub("[\x00-\x1f\x7f]", "", TEXT)
# What must never come out: raw controls (line breaks aside), C1, separators, bidi, lone surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
FORGED = re.compile(r"^\s*#+ FORGED", re.MULTILINE)
MARKUP = re.compile(r"<(?:script|img)\b", re.IGNORECASE)
LONG = re.compile(f"A{{{LINE_CHARS + 1}}}")


def leaks(text: str, markup: bool = False) -> list[str]:
    """What in ``text`` a terminal, a Markdown viewer or (``markup``) a browser would act on, or is unbounded."""
    found = []
    if raw := RAW.search(text):
        found.append(f"raw {raw.group()!r}")
    if FORGED.search(text):
        found.append("a forged heading")
    if markup and MARKUP.search(text):
        found.append("unescaped markup")
    if LONG.search(text) or (max(map(len, text.splitlines() or [""])) > LINE_CHARS and not markup):
        found.append(f"a line over {LINE_CHARS} characters")
    return found


@dataclass
class Output:
    """What one printer wrote: its streams and files, each with whether it is markup (Markdown, HTML)."""

    texts: list[tuple[str, str, bool]]

    def leaks(self) -> list[str]:
        return [f"{name}: {problem}" for name, text, markup in self.texts for problem in leaks(text, markup)]


def _streams(done) -> list[tuple[str, str, bool]]:  # type: ignore[no-untyped-def]
    return [("stdout", done.stdout, False), ("stderr", done.stderr, False)]


def _file(path: Path) -> tuple[str, str, bool]:
    return (path.name, path.read_text(encoding="utf-8", errors="surrogateescape"), path.suffix in (".md", ".html"))


def _hostile(result, status: str = "ok") -> None:  # type: ignore[no-untyped-def]
    result.model_shape = result.model_shape.model_copy(update={"display_name": "Llama" + CORPUS})  # not the registry's
    result.gpu_info.device_name = "H100" + CORPUS
    result.environment.hostname = CORPUS
    result.effective_settings = EffectiveSettings(settings={"init_method_std": result.platform + CORPUS,
                                                            "samples_digest": "sha256:0"}, resolved_by="a test")
    if status != "ok":
        result.error = "log line: " + CORPUS


def _result(out: Path, platform: str, framework: str, status: str = "ok", **kwargs) -> Path:  # type: ignore[no-untyped-def]
    return make_result(out, platform, framework, status=status, MODEL_LAYERS="2",
                       mutate=lambda result: _hostile(result, status), **kwargs)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hostile results (two platforms, one failed run) and a database holding them (#1 amd/tran, #2 nvd/mega failed,
    #3 nvd/tran), the same text written raw into its rows as another writer could, a candidate of #3's workload,
    a forged gate report."""
    from evaluate.history.ingest import add_paths
    from evaluate.history.store import open_database, runs

    root = tmp_path_factory.mktemp("printers")
    results = root / "results"
    for platform, framework, status in (("nvd", "tran", "ok"), ("amd", "tran", "ok"), ("nvd", "mega", "failed")):
        _result(results, platform, framework, status)
    _result(root / "candidate", "nvd", "tran", seed=1)
    with open_database(str(root / "history.sqlite"), create=True) as db:
        add_paths(db, [results])
        with db.write() as conn:
            conn.execute(runs.update().values(model_label=runs.c.platform + CORPUS.replace("\ud800", ""),
                                              baseline_reason=runs.c.baseline_reason + CORPUS.replace("\ud800", "")))
    (root / "gate.json").write_text(json.dumps({
        "verdict": "fail" + CORPUS, "exit_code": 1, "error": "e" + CORPUS, "candidates": [
            {"candidate": "c" + CORPUS,
             "checks": [{"metric": "throughput" + CORPUS, "result": "fail", "line": CORPUS}]}]}))
    return root


Printer = Callable[[Path, Path, pytest.CaptureFixture[str], pytest.MonkeyPatch], Output]


def compare(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.compare import main

    done = main_in_process(main, capsys, "--results-dir", str(ws / "results"), "--output-dir", str(tmp),
                           "--allow-mismatch")
    return Output([*_streams(done), _file(tmp / "compare.md")])


def validate(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.validate import main

    return Output(_streams(main_in_process(main, capsys, str(ws / "results"))))


def page(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.report_html.cli import main

    done = main_in_process(main, capsys, "--results-dir", str(ws / "results"), "--db", str(ws / "history.sqlite"),
                           "--gate-report", str(ws / "gate.json"), "--output", str(tmp / "report.html"))
    return Output([*_streams(done), _file(tmp / "report.html")])


def _history(capsys, *args: str) -> list[tuple[str, str, bool]]:  # type: ignore[no-untyped-def]
    from evaluate.history.cli import main

    return _streams(main_in_process(main, capsys, *args))


def history(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    db = str(ws / "history.sqlite")
    forged = tmp / ("train_nvd_tran_llama" + SHORT.replace("/", "").replace("\n", "").replace("\ud800", "") + ".json")
    forged.write_text("{" + CORPUS.replace("\ud800", ""))
    return Output([*_history(capsys, "list", "--db", db), *_history(capsys, "diff", "1", "3", "--db", db),
                   *_history(capsys, "trend", "--png", "none", "--db", db),
                   *_history(capsys, "add", "--db", str(tmp / "new.sqlite"), str(forged)),
                   *_history(capsys, "tag", "tag:" + CORPUS, "x", "--db", db)])


def gate(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.gate import main

    db = str(ws / "history.sqlite")
    out = []
    candidate = str(ws / "candidate")
    for args in (["--candidate", candidate, "--baseline", "3"], ["--candidate-runs", "2", "--baseline", "2"],
                 ["--candidate-runs", "1", "--baseline", "3", "--cross-vendor"],
                 ["--candidate", candidate, "--baseline", "1,2"], ["--candidate-runs", "1,3"]):
        out += _streams(main_in_process(main, capsys, "--db", db, *args))
    return Output(out)


def _config(tmp: Path, capsys, monkeypatch, text: str, **environ: str) -> list[tuple[str, str, bool]]:  # type: ignore[no-untyped-def]
    from utils.config.load import main

    path = tmp / "config.env"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    try:
        return _streams(main_in_process(main, capsys, "--config", str(path)))
    finally:
        for key in environ:
            monkeypatch.delenv(key)


def config_errors(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    out = []
    for value in (TEXT.replace("\n", "").replace("\r", ""), PRINTABLE):
        for text in (f"MEGATRON_REF='{value}'", f"DATASET='local:{value}'", f"DATASET='{value}'", f"SL='{value}'",
                     value, f"OUTPUT_DIR='{value}'", f"MODELS='llama {value}'", f"FRAMEWORK='{value}'"):
            out += _config(tmp, capsys, monkeypatch, text + "\n")
    out += _config(tmp, capsys, monkeypatch, CORPUS)  # a lone surrogate: no UTF-8 text
    for value in (TEXT, PRINTABLE):
        out += _config(tmp, capsys, monkeypatch, "", MEGATRON_REF=value)
    return Output(out)


def dry_run(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from train.launch.launcher import main

    argv = ("--platform", "cpu", "--framework", "tran", "--model", "llama", "--dry-run")
    monkeypatch.setenv("TPRIMAT_CONFIG", str(tmp / "config.env"))
    (tmp / "config.env").write_text(f"DATA_DIR={tmp / 'data'}\nHISTORY_DB=off\n")
    out = []
    for value in (str(tmp / "o<script>alert(1)</script>"), str(tmp / "o") + TEXT, str(tmp / "o") + PRINTABLE):
        monkeypatch.setenv("OUTPUT_DIR", value)
        out += _streams(main_in_process(main, capsys, *argv))
    return Output(out)


def mlperf_import(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.mlperf.cli import main

    with tarfile.open(SAMPLE) as archive:
        archive.extractall(tmp / "tree", filter="data", members=[
            m for m in archive.getmembers() if "/AMD/" in m.name or m.name.endswith("/AMD")])
    (amd,) = (tmp / "tree").glob("*/AMD")
    runs = next(amd.glob("results/*/llama31_8b"))
    log = runs / "result_1.txt"
    log.write_text(log.read_text(encoding="latin-1").replace(
        '"value": "llama31_8b"', '"value": ' + json.dumps(CORPUS), 1), encoding="latin-1")
    (runs / "result_2.txt").write_text(":::MLLOG {" + CORPUS.replace("\ud800", ""), encoding="utf-8")
    hostile = amd.parent / ("X" + SHORT.replace("/", "").replace("\ud800", "").replace("\n", ""))
    amd.rename(hostile)
    for description in hostile.glob("systems/*.json"):
        data = json.loads(description.read_text())
        data["system_name"] = CORPUS
        description.write_text(json.dumps(data))
    done = main_in_process(main, capsys, "import", str(tmp / "tree"), "--output-dir", str(tmp / "out"))
    return Output(_streams(done))


def gpu_check(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.gpu_check.cli import main
    from utils.machine import prescreen as ps
    from utils.machine.device_facts import Fact

    out = tmp / "check"
    _result(out, "nvd", "tran")
    record = ps.prescreen("nvd", h100(), {"model": Fact(value="NVIDIA H100 80GB HBM3"),
                                          "ecc_enabled": Fact(reason="fixture: not read")})
    data = json.loads(record.model_dump_json())
    data["device_name"] += CORPUS
    data["warnings"] = ["slow" + SHORT]  # the corpus once: the prescreen reader takes at most 1 MiB
    prescreen = tmp / "prescreen.json"
    prescreen.write_text(json.dumps(data))
    said: list[str] = []
    main(["--results-dir", str(out), "--platform", "nvd", "--model", "llama", "--prescreen", str(prescreen),
          "--out-dir", str(tmp), "--frameworks", "tran"], say=said.append)
    return Output([("console", "\n".join(said), False), _file(tmp / "gpu_check.md")])


def extract(ws: Path, tmp: Path, capsys, monkeypatch) -> Output:  # type: ignore[no-untyped-def]
    from evaluate.extract import main

    folder = tmp / "logs"
    folder.mkdir()
    shutil.copy(FIXTURES / "logs" / "megatron_core012_llama.log", folder / "run\x1b[2J\u202e\n# FORGED.log")
    return Output(_streams(main_in_process(main, capsys, str(folder), "--platform", "nvd", "--output-dir",
                                           str(tmp / "out"))))


PRINTERS: dict[str, Printer] = {printer.__name__: printer for printer in (
    compare, validate, page, history, gate, config_errors, dry_run, mlperf_import, gpu_check, extract)}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No config key from the caller's environment; config.env of the repository."""
    from utils.config.model import FIELD_TYPES

    for name in [*FIELD_TYPES, "gbs", "tprimat_config"]:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HISTORY_DB", "off")


@pytest.mark.parametrize("name", list(PRINTERS))
def test_every_printer_shows_the_corpus_inert_and_bounded(name: str, ws: Path, tmp_path: Path, capsys,
                                                          monkeypatch, clean_env) -> None:  # type: ignore[no-untyped-def]
    assert PRINTERS[name](ws, tmp_path, capsys, monkeypatch).leaks() == []


@pytest.mark.parametrize("name", list(PRINTERS))
def test_without_the_sanitiser_every_printer_leaks(name: str, ws: Path, tmp_path: Path, capsys, monkeypatch,
                                                   clean_env) -> None:  # type: ignore[no-untyped-def]
    """The corpus reaches each printer, and only the sanitiser's escaping keeps it out of the output."""
    from utils.io import sanitise

    escaped = sanitise._escaped

    def off(found: re.Match[str]) -> str:
        return escaped(found) if found.group() >= "\ud800" else found.group()  # a lone surrogate: no stream writes it

    monkeypatch.setattr(sanitise, "_escaped", off)
    assert PRINTERS[name](ws, tmp_path, capsys, monkeypatch).leaks()


def test_a_planted_bypass_is_caught(ws: Path, tmp_path: Path, capsys, monkeypatch,  # type: ignore[no-untyped-def]
                                   clean_env) -> None:
    """A run label printed raw (as ``history diff`` and the gate's errors did before issue 49) fails the walk."""
    from evaluate.history.query import RunView

    def raw(view: RunView) -> str:
        r = view.run
        return f"#{r['id']} {r['platform']}/{r['framework']}/{r['model_label']}"

    monkeypatch.setattr(RunView, "label", property(raw))
    assert any("raw" in leak for leak in history(ws, tmp_path, capsys, monkeypatch).leaks())
    assert any("raw" in leak for leak in gate(ws, tmp_path, capsys, monkeypatch).leaks())
