"""The one-command conformance runner (tests/conformance/run.py) without trees or framework Pythons, and its pins.

In the default suite: the arguments it refuses, the junit counting and the table, which suites it runs with
which variables, and that every constraint file pins the image's own transformers, tokenizers and
huggingface_hub (a bump in one file and not the other fails here).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import run
from train.rules.versions import RECORDED_COMMIT_FILE
from utils.config.model import REPO_ROOT

HF_STACK = ("transformers", "tokenizers", "huggingface_hub", "huggingface-hub")


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[name.strip().lower().replace("-", "_")] = version.strip()
    return found


@pytest.mark.parametrize(("constraints", "image"), [
    ("megatron-amd.txt", "amd"), ("megatron-nvd.txt", "nvd"), ("nemo.txt", "nvd"), ("side-amd.txt", "amd"),
    ("side-nvd.txt", "nvd")])
def test_each_constraint_file_pins_the_images_hugging_face_stack(constraints: str, image: str) -> None:
    ours, theirs = pins(run.CONSTRAINTS / constraints), pins(REPO_ROOT / f"{image}-requirements.txt")
    for name in ("transformers", "tokenizers", "huggingface_hub"):
        assert ours[name] == theirs[name], f"{constraints}: {name} {ours[name]} but {image}-requirements.txt " \
                                           f"{theirs[name]}"
    assert "torch" not in ours or ours["torch"] == "2.13.0"  # the CPU wheel, as shell/setup.sh installs it


def test_the_nemo_python_runs_the_nvd_images_megatron_core_line() -> None:
    assert pins(run.CONSTRAINTS / "nemo.txt")["megatron_core"] == pins(REPO_ROOT / "nvd-requirements.txt")[
        "megatron_core"]


def test_help_and_bad_arguments_are_one_line(tmp_path: Path) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tests.conformance.run", *argv], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120, check=False)

    done = cli("--help")
    assert done.returncode == 0 and "usage: python -m tests.conformance.run" in done.stdout
    tree = tmp_path / "megatron-lm"
    tree.mkdir()
    (tree / RECORDED_COMMIT_FILE).write_text("main " + "0" * 40 + "\n", encoding="utf-8")
    for argv, words in ((["--megatron", str(tree)], "expected NAME=PATH"),
                        (["--megatron", f"847781764f={tmp_path / 'nowhere'}"], "no such folder"),
                        (["--megatron", f"847781764f={tree}"], "not 847781764f"),
                        (["--primus", f"v0.5.0={tree}"], "no primus/ package")):
        done = cli(*argv)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and words in lines[0], (argv, done.stderr)


def test_junit_counts_and_the_table(tmp_path: Path) -> None:
    xml = tmp_path / "suite.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest" tests="4">'
        '<testcase classname="t.a" name="ok"/>'
        '<testcase classname="t.a" name="bad"><failure message="AssertionError: x != y">trace</failure></testcase>'
        '<testcase classname="t.a" name="broke"><error message="fixture failed"/></testcase>'
        '<testcase classname="t.a" name="later"><skipped message="no tree"/></testcase>'
        '</testsuite></testsuites>', encoding="utf-8")
    passed, failed, skipped, failures = run.junit_counts(xml)
    assert (passed, failed, skipped) == (1, 2, 1)
    assert failures == ["t.a::bad: AssertionError: x != y", "t.a::broke: fixture failed"]
    rows = [run.Row("mega @ 847781764f", "Megatron-LM 847781764fe4", "megatron-amd (transformers 4.57.1)",
                    passed, failed, skipped, 125.0, failures=failures),
            run.Row("prim @ v0.5.0", "Primus", "megatron-amd", status="missing", note="no --primus tree given")]
    text = run.table(rows, "header")
    assert "| mega @ 847781764f | Megatron-LM 847781764fe4 | megatron-amd (transformers 4.57.1) | 1 | 2 | 1 | 2 min |" \
        in text
    assert "| prim @ v0.5.0 | Primus | megatron-amd | - | - | - | 0 s | no --primus tree given |" in text
    assert "* mega @ 847781764f: t.a::bad: AssertionError: x != y" in text


def test_every_suite_is_named_and_a_missing_tree_says_so(tmp_path: Path) -> None:
    pythons = {name: f"/py/{name}" for name in run.PYTHONS}
    bare = {suite.name: suite for suite in run.suites([], None, pythons)}
    assert set(bare) == {"dataset (images' transformers)", "mega @ 847781764f", "prim @ v0.5.0", "nemo @ 2.3.0",
                         "tuned profiles", "mlperf profile", "preprocess_data (amd pins)",
                         "preprocess_data (nvd pins)"}
    assert "--mlcommons-training" in bare["mlperf profile"].missing
    assert bare["prim @ v0.5.0"].missing and bare["mega @ 847781764f"].missing
    assert bare["nemo @ 2.3.0"].missing is None and bare["nemo @ 2.3.0"].env == {"TPRIMAT_NEMO_PYTHON": "/py/nemo"}
    trees = [run.Tree(name, tmp_path / name, commit) for name, commit in run.DOCUMENTED_LINES.items()]
    full = {suite.name: suite for suite in run.suites(trees, run.Tree("v0.5.0", tmp_path / "primus", None), pythons)}
    assert {"mega @ 847781764f", "mega @ core_v0.12.0", "mega @ 3cdfd613"} <= set(full)
    nvd = full["preprocess_data (nvd pins)"]
    assert nvd.missing is None and nvd.env == {
        "TPRIMAT_MEGATRON_PYTHON": "/py/megatron-nvd", "TPRIMAT_MEGATRON_LM": str(tmp_path / "847781764f"),
        "TPRIMAT_MEGATRON_LM_LEGACY": str(tmp_path / "core_v0.12.0")}
    assert full["mlperf profile"].missing  # the mlcommons trees not given
    cited = {option: tmp_path / option.strip("-") for option in run.MLPERF_TREES}
    mlperf = run.suites(trees, run.Tree("v0.5.0", tmp_path / "primus", None), pythons, cited)
    row, = (suite for suite in mlperf if suite.name == "mlperf profile")
    assert row.missing is None and row.env["TPRIMAT_NEMO_TREE"] == str(tmp_path / "nemo-tree")
    assert row.env["TPRIMAT_MLCOMMONS_POLICIES"] == str(tmp_path / "mlcommons-policies")
    assert row.env["TPRIMAT_PRIMUS"] == str(tmp_path / "primus") and row.env["TPRIMAT_NEMO_PYTHON"] == "/py/nemo"
    # the dataset row's compile_helpers test needs the reference tree's Makefile; without a tree it skips
    assert full["dataset (images' transformers)"].env == {"TPRIMAT_MEGATRON_LM": str(tmp_path / "847781764f")}
    assert bare["dataset (images' transformers)"].env == {}
    for suite in full.values():  # every test file a suite names exists
        assert all((REPO_ROOT / path).is_file() for path in suite.files), suite


def test_a_python_is_named_by_the_hash_of_the_files_it_is_built_from(tmp_path: Path, monkeypatch) -> None:
    for name in ("requirements.txt", "constraints.txt"):
        (tmp_path / name).write_text("six\n", encoding="utf-8")
    monkeypatch.setattr(run, "CONSTRAINTS", tmp_path)
    spec = run.PythonSpec("x", "requirements.txt", "constraints.txt")
    before = run.python_dir(tmp_path / "envs", spec)
    (tmp_path / "constraints.txt").write_text("six==1.17.0\n", encoding="utf-8")
    assert run.python_dir(tmp_path / "envs", spec) != before
