"""Bad input (issue 48 item 5): one line per file saying why, nothing counted silently, exit 1 when nothing is left."""

from __future__ import annotations

import json
import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from evaluate.mlperf.cli import main
from tests.helpers.proc import main_in_process

SYSTEM = "MI355X_EPYC_9575F_pytorch"


@pytest.fixture
def tree(sample_tree, tmp_path) -> Path:
    """AMD's MI355X system alone: ten runs, its description and scaling.json, in a tree of its own."""
    root = tmp_path / "training_results_v5.1"
    shutil.copytree(sample_tree / "AMD", root / "AMD")
    return root


def runs(tree: Path) -> Path:
    return tree / "AMD" / "results" / SYSTEM / "llama31_8b"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="latin-1")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="latin-1")


def run_import(capsys, tmp_path: Path, *paths: Path):
    return main_in_process(main, capsys, "import", *map(str, paths), "--output-dir", str(tmp_path / "out"))


def lines_about(stderr: str, name: str) -> list[str]:
    return [line for line in stderr.splitlines() if name in line]


def test_a_truncated_log(tree, tmp_path, capsys):
    log = runs(tree) / "result_3.txt"
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    done = run_import(capsys, tmp_path, tree)
    assert done.returncode == 0  # nine runs are usable
    (line,) = lines_about(done.stderr, "result_3.txt")
    assert "not counted in MLPerf's score" in line and ("do not parse" in line or "no run_stop" in line)
    assert "(9 ok)" in done.stdout and "MLPerf score" in done.stdout  # one run may be dropped: the olympic rule


def test_a_run_without_run_stop_and_an_aborted_one(tree, tmp_path, capsys):
    lines = (runs(tree) / "result_1.txt").read_text().splitlines(keepends=True)
    (runs(tree) / "result_1.txt").write_text("".join(line for line in lines if '"run_stop"' not in line))
    edit(runs(tree) / "result_2.txt", '"status": "success"', '"status": "aborted"')
    done = run_import(capsys, tmp_path, tree)
    assert "no run_stop" in lines_about(done.stderr, "result_1.txt")[0]
    assert "run_stop status aborted" in lines_about(done.stderr, "result_2.txt")[0]
    assert "2 runs do not count, MLPerf allows 1: no score" in done.stdout  # as the summarizer says CRITICAL ERROR


def test_a_missing_systems_file_and_one_that_disagrees_with_the_log(tree, tmp_path, capsys):
    description = tree / "AMD" / "systems" / f"{SYSTEM}.json"
    data = json.loads(description.read_text())
    data["accelerator_model_name"] = "NVIDIA H100-SXM5-80GB"
    description.write_text(json.dumps(data))
    done = run_import(capsys, tmp_path, tree)
    assert done.returncode == 1 and "(0 ok)" in done.stdout
    assert len(lines_about(done.stderr, "disagrees with the log's submission_platform")) == 10
    description.unlink()
    done = run_import(capsys, tmp_path, tree)
    assert done.returncode == 1 and len(lines_about(done.stderr, "no system description AMD/systems/")) == 10


def test_impossible_values(tree, tmp_path, capsys):
    """A stop before the start (a negative time) and a run of a millisecond (a throughput no chip has)."""
    for name, shift in (("result_4.txt", -10**9), ("result_5.txt", None)):
        log = runs(tree) / name
        text = log.read_text()
        start_line = next(line for line in text.splitlines() if '"run_start"' in line)
        start = json.loads(start_line[len(":::MLLOG "):])["time_ms"]
        stop_line = next(line for line in text.splitlines() if '"run_stop"' in line)
        stop = json.loads(stop_line[len(":::MLLOG "):])["time_ms"]
        new = start + shift if shift is not None else start + 1
        log.write_text(text.replace(stop_line, stop_line.replace(f'"time_ms": {stop}', f'"time_ms": {new}')))
    done = run_import(capsys, tmp_path, tree)
    assert "a negative time to train" in lines_about(done.stderr, "result_4.txt")[0]
    assert "an impossible figure" in lines_about(done.stderr, "result_5.txt")[0]
    assert "more than the hardware can do" in lines_about(done.stderr, "result_5.txt")[0]


def test_a_duplicated_run_and_another_benchmarks(tree, tmp_path, capsys):
    shutil.copy(runs(tree) / "result_0.txt", runs(tree) / "result_10.txt")
    edit(runs(tree) / "result_6.txt", '"value": "llama31_8b"', '"value": "llama2_70b_lora"')
    other = runs(tree).parent / "flux1"
    other.mkdir()
    shutil.copy(runs(tree) / "result_7.txt", other / "result_0.txt")
    done = run_import(capsys, tmp_path, tree)
    assert "a duplicated run: the same log as AMD/results" in lines_about(done.stderr, "result_10.txt")[0]
    assert "logs benchmark llama2_70b_lora, not llama31_8b" in lines_about(done.stderr, "result_6.txt")[0]
    assert "1 run(s) of benchmark flux1 left out" in done.stderr


def test_fewer_runs_than_mlperf_requires(tree, tmp_path, capsys):
    (runs(tree) / "result_9.txt").unlink()
    done = run_import(capsys, tmp_path, tree)
    assert done.returncode == 0 and "(9 ok)" in done.stdout
    assert "9 runs, MLPerf requires 10: no score (MLPerf publishes none)" in done.stdout


def test_a_zip_with_hostile_member_names(tree, tmp_path, capsys):
    log = (runs(tree) / "result_0.txt").read_bytes()
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("../AMD/results/X/llama31_8b/result_0.txt", log)
        zipped.writestr("/abs/AMD/results/X/llama31_8b/result_1.txt", log)
        zipped.writestr("AMD\\results\\X\\llama31_8b\\result_2.txt", log)
        link = zipfile.ZipInfo("AMD/results/X/llama31_8b/result_3.txt")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zipped.writestr(link, "/etc/passwd")
    done = run_import(capsys, tmp_path, archive)
    assert done.returncode == 1
    assert len(lines_about(done.stderr, "refused: an absolute, '..', backslash")) == 3
    assert len(lines_about(done.stderr, "refused: a symbolic link")) == 1
    assert not list((tmp_path / "out").glob("train_*.json"))


def test_check_runs_mlperfs_checkers_and_a_failed_log_does_not_count(tree, tmp_path, capsys):
    """--check: MLPerf's compliance checker on every log (as the summarizer runs it) and the RCP checker on the
    system; a log whose AdamW beta 1 is not the reference's fails, and the score drops it as the summarizer does."""
    beta = "\"key\": \"opt_adamw_beta_1\", \"value\": "
    edit(runs(tree) / "result_8.txt", beta + "0.9", beta + "0.8")
    done = main_in_process(main, capsys, "import", str(tree), "--check", "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 0 and "9 counted" in done.stdout
    assert "MLPerf's compliance checker: FAILED (CHECK for 'opt_adamw_beta_1' failed" in \
        lines_about(done.stderr, "result_8.txt")[0]
    checked = [json.loads(p.read_text())["published"] for p in (tmp_path / "out").glob("train_*.json")]
    assert sorted(p["check"] for p in checked) == ["FAILED"] + ["SUCCESS"] * 9
    assert all(p["rcp"].startswith("Pass: RCP found (mlperf-logging's RCP checker, ruleset 5.1.0); it normalises by")
               for p in checked)


@pytest.mark.parametrize("where", ["file", "link-to-itself"])
def test_an_output_folder_that_cannot_be_made_is_one_line(tree, tmp_path, capsys, where):
    """Issue 49's hostile pass (M51-M53): ``--output-dir`` a file or a link loop was a FileExistsError traceback."""
    out = tmp_path / "out"
    if where == "file":
        out.write_text("mine\n")
    else:
        out.symlink_to("out")
    done = main_in_process(main, capsys, "import", str(tree), "--output-dir", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"mlperf: --output-dir {out}: ")
    assert where != "file" or out.read_text() == "mine\n"


def test_an_accelerator_naming_both_vendors_is_refused(tree, tmp_path, capsys):
    """Issue 49's hostile pass (M44): "NVIDIA H100 ... AMD MI355X" was imported as amd (the first vendor named)."""
    description = tree / "AMD" / "systems" / f"{SYSTEM}.json"
    data = json.loads(description.read_text())
    data["accelerator_model_name"] = "NVIDIA H100 \x1b[2J AMD MI355X"
    description.write_text(json.dumps(data))
    done = run_import(capsys, tmp_path, tree)
    assert done.returncode == 1 and "(0 ok)" in done.stdout and "\x1b" not in done.stderr
    assert len(lines_about(done.stderr, "names neither vendor or both")) == 10
