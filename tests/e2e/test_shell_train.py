"""shell/train.sh: loops over train.launch.jobs' selection, continues past failures, compares, summarizes.

The launchers are replaced (in a copy of the repository) by stand-ins that record their arguments
and exit with a chosen status, so this tests the orchestration alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.shell import run_script, script_env

STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0")${{*:+ $*}}" >> "$JOB_LOG"
exit {code}
"""


@pytest.fixture
def repo(repo: Path) -> Path:
    """The shared copy (tests/e2e/conftest.py) whose jobs are stand-ins (the qwen ones exit 3), without compare.py."""
    for script in (repo / "train").glob("train_*_*_*.sh"):
        code = 3 if "_qwen" in script.name else 0
        script.write_text(STAND_IN.format(code=code))
    compare = repo / "evaluate" / "compare.py"
    if compare.exists():
        compare.unlink()
    return repo


def test_cpu_runs_tran_continues_past_failure_and_summarizes(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/train.sh", env=script_env(tmp_path, PLATFORM="cpu", FRAMEWORK="tran", RUNS="2",
                                                      MODELS="llama qwen"))
    assert (tmp_path / "jobs.log").read_text().splitlines() == [
        "train_cpu_tran_llama.sh --run-index 1", "train_cpu_tran_llama.sh --run-index 2",
        "train_cpu_tran_qwen.sh --run-index 1", "train_cpu_tran_qwen.sh --run-index 2",
    ]
    assert proc.returncode == 1, "a failed job makes the whole run fail, after every job ran"
    assert "cpu/tran/qwen run 1 exited with 3; continuing" in proc.stderr
    assert "evaluate/compare.py is not present" in proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("cpu ")]
    assert [(r[2], r[3], r[4], r[5]) for r in rows] == [
        # the stand-ins write no result: each keeps the incomplete one train.sh wrote before it started
        ("llama", "1", "0", "incomplete"), ("llama", "2", "0", "incomplete"),
        ("qwen", "1", "3", "incomplete"), ("qwen", "2", "3", "incomplete"),
    ]
    assert "0 of 4 job(s) finished ok" in proc.stdout


@pytest.mark.parametrize(("platform", "asked", "runs"), [("nvd", "prim", "nemo"), ("amd", "nemo", "prim")])
def test_vendor_mapping_is_applied_and_printed(repo: Path, tmp_path: Path, platform: str, asked: str,
                                               runs: str) -> None:
    proc = run_script(repo, "shell/train.sh",
                      env=script_env(tmp_path, PLATFORM=platform, FRAMEWORK=asked, MODELS="llama"))
    assert f"FRAMEWORK={asked} on {platform} runs {runs}" in proc.stderr
    assert (tmp_path / "jobs.log").read_text().splitlines() == [f"train_{platform}_{runs}_llama.sh"]


@pytest.mark.parametrize("platform", ["amd", "nvd"])
def test_all_runs_every_framework_of_the_platform(repo: Path, tmp_path: Path, platform: str) -> None:
    run_script(repo, "shell/train.sh", env=script_env(tmp_path, PLATFORM=platform, FRAMEWORK="all"))
    frameworks = {"amd": ("mega", "prim", "tran", "deep"), "nvd": ("mega", "nemo", "tran", "deep")}[platform]
    assert (tmp_path / "jobs.log").read_text().splitlines() == [
        f"train_{platform}_{f}_{m}.sh" for f in frameworks for m in ("llama", "qwen", "mistral")]


def test_unavailable_framework_is_an_error_before_any_job(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/train.sh", env=script_env(tmp_path, PLATFORM="cpu", FRAMEWORK="mega"))
    assert proc.returncode == 2
    assert "valid: tran, deep" in proc.stderr
    assert not (tmp_path / "jobs.log").exists()


def test_dry_run_is_passed_and_skips_compare(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/train.sh", "--dry-run",
                      env=script_env(tmp_path, PLATFORM="cpu", MODELS="llama", FRAMEWORK="tran"))
    assert (tmp_path / "jobs.log").read_text().splitlines() == ["train_cpu_tran_llama.sh --dry-run"]
    assert "dry run, skipping the comparison" in proc.stdout


def test_dry_run_never_reports_an_old_result(repo: Path, tmp_path: Path) -> None:
    """An ok result of an earlier run is no answer for a run that trained nothing (issue 12)."""
    from tests.helpers.evaluate import make_result
    from utils.result.file import status_of

    out = tmp_path / "out"
    old = make_result(out, "amd", "tran", "llama").rename(out / "train_cpu_tran_llama.json")
    assert status_of(old) == "ok"
    proc = run_script(repo, "shell/train.sh", "--dry-run",
                      env=script_env(tmp_path, PLATFORM="cpu", MODELS="llama", FRAMEWORK="tran"))
    assert proc.returncode == 0, proc.stderr
    assert " ok " not in proc.stdout and "finished ok" not in proc.stdout
    assert "1 launch plan(s) shown, nothing trained" in proc.stdout
    assert status_of(old) == "ok", "and leaves it alone"


def test_compare_is_called_with_the_results_dir(repo: Path, tmp_path: Path) -> None:
    (repo / "evaluate" / "compare.py").write_text(
        "import sys\nopen(sys.argv[-1] + '/compared', 'w').write(' '.join(sys.argv[1:]))\n")
    run_script(repo, "shell/train.sh", env=script_env(tmp_path, PLATFORM="cpu", MODELS="llama", FRAMEWORK="tran"))
    assert (tmp_path / "out" / "compared").read_text() == f"--results-dir {tmp_path / 'out'}"


def test_other_node_ranks_skip_compare_and_report_exit_codes(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/train.sh", env=script_env(
        tmp_path, PLATFORM="cpu", MODELS="llama", FRAMEWORK="tran", NNODES="2", NODE_RANK="1", DP="16"))
    assert proc.returncode == 0, proc.stderr
    assert "NODE_RANK=1; node 0 writes the results" in proc.stdout
    assert "exit 0  train_cpu_tran_llama.json" in proc.stdout


def test_several_frameworks_run_in_the_order_given(repo: Path, tmp_path: Path) -> None:
    proc = run_script(repo, "shell/train.sh", env=script_env(tmp_path, PLATFORM="amd", FRAMEWORK="tran nemo",
                                                       MODELS="llama"))
    assert "FRAMEWORK=nemo on amd runs prim" in proc.stderr
    assert (tmp_path / "jobs.log").read_text().splitlines() == ["train_amd_tran_llama.sh", "train_amd_prim_llama.sh"]
