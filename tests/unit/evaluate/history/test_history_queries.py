"""``history list`` filters, ``history trend`` (table with version changes, PNG) and ``history diff``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate.history.query import library_matches
from tests.helpers.evaluate import make_result
from tests.helpers.history import cli

Capture = pytest.CaptureFixture[str]


def _versioned(torch: str, when: str, te: str = "2.2"):  # type: ignore[no-untyped-def]
    def change(data: dict) -> None:
        data["gpu_info"]["pytorch_version"] = torch
        data["framework_versions"]["torch"] = torch
        data["framework_versions"]["transformer_engine"] = te
        data["finished_at"] = when
    return change


def _stored(tmp_path: Path, capsys: Capture) -> str:
    """Four nvd/mega/llama runs over three days (torch 2.6 -> 2.7 on the third) and one amd run."""
    db = str(tmp_path / "history.sqlite")
    files = []
    plan = [("2.6.0", "2025-11-01T10:00:00+00:00", 1.50), ("2.6.0", "2025-11-02T10:00:00+00:00", 1.52),
            ("2.7.0", "2025-11-03T10:00:00+00:00", 1.40), ("2.7.0", "2025-11-03T12:00:00+00:00", 1.41)]
    for k, (torch, when, step) in enumerate(plan):
        path = make_result(tmp_path / "out", "nvd", "mega", "llama", run_index=k + 1, seed=k, step_time=step,
                           mutate=None)
        data = json.loads(path.read_text())
        _versioned(torch, when)(data)
        path.write_text(json.dumps(data))
        files.append(path)
    amd = make_result(tmp_path / "out", "amd", "prim", "llama", seed=9)
    assert cli(capsys, "add", "--db", db, *map(str, files), str(amd)).returncode == 0
    return db


def test_list_filters(tmp_path: Path, capsys: Capture) -> None:
    db = _stored(tmp_path, capsys)

    def listed(*filters: str) -> list[str]:
        proc = cli(capsys, "list", "--db", db, *filters)
        assert proc.returncode == 0, proc.stderr
        return [line.split()[0] for line in proc.stdout.splitlines() if line.strip().startswith("#")]

    assert len(listed()) == 5
    assert listed("--platform", "amd") == ["#5"]
    assert listed("--framework", "mega", "--model", "llama") == ["#1", "#2", "#3", "#4"]
    assert listed("--device", "h100") == ["#1", "#2", "#3", "#4"]
    assert listed("--library", "torch=2.7.*", "--platform", "nvd") == ["#3", "#4"]
    assert listed("--library", "framework.torch=2.6.0", "--since", "2025-11-02") == ["#2"]
    assert listed("--until", "2025-11-01") == ["#1"]
    assert listed("--limit", "2", "--platform", "nvd") == ["#3", "#4"]
    assert listed("--profile", "tuned") == [] and "no runs match" in cli(capsys, "list", "--db", db,
                                                                         "--profile", "tuned").stdout
    proc = cli(capsys, "list", "--db", db, "--json", "--platform", "amd")
    assert json.loads(proc.stdout)[0]["framework"] == "prim"
    bad = cli(capsys, "list", "--db", db, "--since", "last tuesday")
    assert bad.returncode == 2 and "not an ISO date" in bad.stderr


def test_library_spec() -> None:
    versions = {"torch": "2.7.0", "framework.transformer_engine": "2.2.0", "library.deepspeed": "0.16.7"}
    assert library_matches(versions, "torch=2.7.0") and library_matches(versions, "transformer_engine")
    assert library_matches(versions, "deepspeed=0.16.*") and not library_matches(versions, "torch=2.6*")
    assert not library_matches(versions, "nemo")


def test_trend_marks_version_changes_and_draws_the_png(tmp_path: Path, capsys: Capture) -> None:
    db = _stored(tmp_path, capsys)
    png = tmp_path / "trend.png"
    proc = cli(capsys, "trend", "--db", db, "--png", str(png), "--platform", "nvd")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "== nvd/mega/llama on NVIDIA H100 80GB HBM3: 4 run(s)"
    changed = [line for line in lines if "->" in line]
    assert len(changed) == 1 and "#3" in changed[0] and "torch 2.6.0 -> 2.7.0" in changed[0]
    assert "framework.torch 2.6.0 -> 2.7.0" in changed[0]
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    library = cli(capsys, "trend", "--db", db, "--png", "none", "--library", "torch=2.7.*")  # filtered in Python
    assert "nvd/mega/llama on NVIDIA H100 80GB HBM3: 2 run(s)" in library.stdout and "->" not in library.stdout
    none = cli(capsys, "trend", "--db", db, "--png", "none", "--framework", "deep")
    assert none.returncode == 0 and none.stdout.strip() == "no runs match"


def test_diff_names_what_changed_beside_the_deltas(tmp_path: Path, capsys: Capture) -> None:
    db = _stored(tmp_path, capsys)
    proc = cli(capsys, "diff", "--db", db, "1,2", "3,4")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "versions.torch: A 2.6.0 | B 2.7.0" in out and "versions.pytorch: A 2.6.0 | B 2.7.0" in out
    assert "hardware.device_name" not in out, "only what differs is listed"
    tps = next(line for line in out.splitlines() if line.strip().startswith("tokens/s/GPU"))
    assert "B vs A +" in tps and "[95% " in tps, tps
    single = cli(capsys, "diff", "--db", db, "1", "5")
    assert "run.platform: A nvd | B amd" in single.stdout and "run.framework: A mega | B prim" in single.stdout
    assert "no interval: one run on a side" in single.stdout
    assert cli(capsys, "diff", "--db", db, "1", "tag:none").returncode == 2


def test_tags_select_runs(tmp_path: Path, capsys: Capture) -> None:
    db = _stored(tmp_path, capsys)
    assert cli(capsys, "tag", "--db", db, "3,4", "release-2.7").returncode == 0
    proc = cli(capsys, "list", "--db", db, "--tag", "release-2.7")
    assert proc.stdout.count("nvd/mega/llama") == 2
    assert cli(capsys, "tag", "--db", db, "42", "x").returncode == 2
