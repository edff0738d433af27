"""train/launch/jobs.py: framework selection per platform, the prim<->nemo mapping, repeats, the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env
from train.launch.jobs import (
    FRAMEWORKS_BY_PLATFORM,
    Job,
    JobOutcome,
    format_summary,
    frameworks_for,
    read_exit_codes,
    resolve_framework,
    select_jobs,
    summarize,
)
from utils.config.load import load_config
from utils.config.rules import ConfigError


def _cfg(tmp_path: Path, **env: str):
    return load_config(REPO / "config.env", {"OUTPUT_DIR": str(tmp_path / "out"), **env})


def test_frameworks_by_platform() -> None:
    assert FRAMEWORKS_BY_PLATFORM == {"amd": ("mega", "prim", "tran", "deep"),
                                      "nvd": ("mega", "nemo", "tran", "deep"), "cpu": ("tran", "deep")}


@pytest.mark.parametrize(("platform", "asked", "runs", "mapped"), [
    ("nvd", "prim", "nemo", True), ("amd", "nemo", "prim", True),
    ("amd", "prim", "prim", False), ("nvd", "nemo", "nemo", False),
    ("amd", "mega", "mega", False), ("cpu", "tran", "tran", False),
])
def test_resolve_framework(platform: str, asked: str, runs: str, mapped: bool) -> None:
    framework, note = resolve_framework(platform, asked)
    assert framework == runs
    assert (note is not None) == mapped
    if mapped:
        assert asked in note and runs in note


@pytest.mark.parametrize(("platform", "asked"), [("cpu", "mega"), ("cpu", "prim"), ("cpu", "nemo"), ("amd", "x")])
def test_resolve_framework_rejects_unavailable(platform: str, asked: str) -> None:
    with pytest.raises(ValueError, match=r"valid: .*tran"):
        resolve_framework(platform, asked)


def test_resolve_framework_rejects_unknown_platform() -> None:
    with pytest.raises(ValueError, match="amd, nvd, cpu"):
        resolve_framework("tpu", "tran")


@pytest.mark.parametrize("platform", ["amd", "nvd", "cpu"])
def test_all_selects_every_framework_of_the_platform(tmp_path: Path, platform: str) -> None:
    jobs = select_jobs(_cfg(tmp_path, FRAMEWORK="all"), platform)
    assert [(j.framework, j.model) for j in jobs] == [
        (f, m) for f in FRAMEWORKS_BY_PLATFORM[platform] for m in ("llama", "qwen", "mistral")
    ]
    for job in jobs:
        assert job.platform == platform and job.run_index is None
        assert job.script == REPO / "train" / f"train_{platform}_{job.framework}_{job.model}.sh"
        assert job.script.is_file()
        assert job.result == tmp_path / "out" / f"train_{platform}_{job.framework}_{job.model}.json"


@pytest.mark.parametrize(("platform", "asked", "runs", "notes"), [
    ("amd", "tran mega", ("tran", "mega"), 0),          # the order given is the run order
    ("nvd", "prim nemo", ("nemo",), 1),                 # mapped onto one already listed: runs once
    ("amd", "nemo,tran", ("prim", "tran"), 1),
    ("cpu", "tran tran", ("tran",), 0),
    ("cpu", "tran deep", ("tran", "deep"), 0),
])
def test_several_frameworks(platform: str, asked: str, runs: tuple[str, ...], notes: int) -> None:
    cfg_value = load_config(REPO / "config.env", {"FRAMEWORK": asked}).framework
    frameworks, printed = frameworks_for(platform, cfg_value)
    assert frameworks == runs and len(printed) == notes


def test_several_frameworks_select_jobs_in_that_order(tmp_path: Path) -> None:
    jobs = select_jobs(_cfg(tmp_path, FRAMEWORK="tran mega", MODELS="qwen"), "nvd")
    assert [j.script.name for j in jobs] == ["train_nvd_tran_qwen.sh", "train_nvd_mega_qwen.sh"]


def test_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MODELS='gpt': allowed values are llama, qwen, mistral"):
        _cfg(tmp_path, MODELS="llama gpt")


def test_unknown_or_misplaced_framework_names_list_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="FRAMEWORK='jax': allowed values are mega, prim, nemo, tran, deep, all"):
        _cfg(tmp_path, FRAMEWORK="tran jax")
    with pytest.raises(ConfigError, match="all stands alone"):
        _cfg(tmp_path, FRAMEWORK="all tran")
    with pytest.raises(ValueError, match="'jax' is not a framework; on platform amd; valid: mega, prim, tran, deep"):
        frameworks_for("amd", ("jax",))
    with pytest.raises(ValueError, match="'mega' is not available on platform cpu; valid: tran, deep"):
        frameworks_for("cpu", ("tran", "mega"))


def test_runs_number_results_from_one(tmp_path: Path) -> None:
    jobs = select_jobs(_cfg(tmp_path, FRAMEWORK="prim", MODELS="qwen", RUNS="3"), "nvd")
    assert [(j.framework, j.run_index, j.result.name) for j in jobs] == [
        ("nemo", k, f"train_nvd_nemo_qwen_r{k}.json") for k in (1, 2, 3)
    ]


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "train.launch.jobs", *args], cwd=REPO, capture_output=True, text=True,
                          env=clean_env(tmp_path, OUTPUT_DIR=str(tmp_path / "out"), **env), timeout=60)


def test_cli_lists_jobs_and_prints_the_mapping_note(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "--platform", "amd", FRAMEWORK="nemo", MODELS="llama")
    assert proc.returncode == 0, proc.stderr
    assert "FRAMEWORK=nemo on amd runs prim" in proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.split("\t") == ["amd", "prim", "llama", "-", str(REPO / "train" / "train_amd_prim_llama.sh"),
                                str(tmp_path / "out" / "train_amd_prim_llama.json")]


def test_cli_platform_from_config(tmp_path: Path) -> None:
    proc = _cli(tmp_path, PLATFORM="cpu", FRAMEWORK="all")
    assert proc.returncode == 0, proc.stderr
    assert [line.split("\t")[:3] for line in proc.stdout.splitlines()] == [
        ["cpu", f, m] for f in ("tran", "deep") for m in ("llama", "qwen", "mistral")]


def test_cli_rejects_unavailable_framework(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "--platform", "cpu", FRAMEWORK="mega")
    assert proc.returncode == 2
    assert "not available on platform cpu" in proc.stderr and proc.stdout == ""


def test_summary_table(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, FRAMEWORK="all", MODELS="llama")
    jobs = select_jobs(cfg, "nvd")
    (tmp_path / "out").mkdir()
    jobs[1].result.write_text("{not json")
    codes = tmp_path / "codes"
    codes.write_text(f"{jobs[0].result}\t0\n{jobs[1].result}\t1\n")
    outcomes = summarize(jobs, read_exit_codes(codes))
    assert [(o.job.framework, o.exit_code, o.status) for o in outcomes] == [
        ("mega", 0, "missing"), ("nemo", 1, "invalid"), ("tran", -1, "not run"), ("deep", -1, "not run")]
    table = format_summary(outcomes, cfg.output_dir)
    assert "train_nvd_nemo_llama.json" in table and "0 of 4 job(s) finished ok" in table


def test_summary_rows_start_with_the_platform_and_keep_long_paths_whole(tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 150)
    job = Job("amd", "mega", "llama", None, Path("/r/x.sh"), long_dir / "train_amd_mega_llama.json")
    table = format_summary([JobOutcome(job, 0, "ok")], tmp_path)
    (row,) = [line for line in table.splitlines() if line.startswith("amd ")]
    assert row.split() == ["amd", "mega", "llama", "-", "0", "ok", f"{'d' * 150}/train_amd_mega_llama.json"]
    assert table.splitlines()[0].split() == ["platform", "framework", "model", "run", "exit", "status", "result"]
    assert table.isascii() and table.endswith(f"1 of 1 job(s) finished ok; results in {tmp_path}")


def test_read_exit_codes_rejects_garbage(tmp_path: Path) -> None:
    codes = tmp_path / "codes"
    codes.write_text("no tab here\n")
    with pytest.raises(ValueError, match="codes:1"):
        read_exit_codes(codes)


def test_job_line_round_trip(tmp_path: Path) -> None:
    job = Job("amd", "mega", "qwen", 2, Path("/r/train/x.sh"), Path("/o/y.json"))
    assert job.to_line().split("\t") == ["amd", "mega", "qwen", "2", "/r/train/x.sh", "/o/y.json"]
