"""``python -m evaluate.gate``: exit 0 pass, 1 regression (a failing line names metric, values, threshold), 2 bad input.

Candidates are real result files (``tests/helpers/evaluate.py: make_result``) changed the way a regression would
change them: slower steps, a diverging loss, another platform.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evaluate.history.gate import _tolerance_at, check_loss
from evaluate.history.gate_report import GateReport
from evaluate.history.noise import PUBLISHED, curve_gaps, tolerance
from evaluate.history.query import RunView
from tests.helpers.evaluate import make_result
from tests.helpers.history import cli, results
from train.settings.rules import GATE, RULES

Capture = pytest.CaptureFixture[str]


def _baseline(tmp_path: Path, capsys: Capture, count: int = 3, **kwargs) -> str:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "history.sqlite")
    files = results(tmp_path / "base", count, **kwargs)
    assert cli(capsys, "add", "--db", db, "--tag", "accepted", *map(str, files)).returncode == 0
    return db


def _candidate(tmp_path: Path, name: str = "cand", change=None, **kwargs) -> Path:  # type: ignore[no-untyped-def]
    path = make_result(tmp_path / name, kwargs.pop("platform", "nvd"), "mega", "llama", seed=7, **kwargs)
    if change is not None:
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return path


def _slower(factor: float):  # type: ignore[no-untyped-def]
    def change(data: dict) -> None:
        perf = data["performance_metrics"]
        for key in ("tokens_per_second", "tokens_per_second_per_gpu"):
            perf[key] = perf[key] / factor
        perf["median_step_time_seconds"] *= factor
    return change


def _diverging(data: dict) -> None:
    losses = data["loss_values"]
    data["loss_values"] = [v * (1 + 0.5 * i / len(losses)) for i, v in enumerate(losses)]


def test_a_like_run_passes(tmp_path: Path, capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys)
    proc = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path)), "--baseline", "tag:accepted",
               module="evaluate.gate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS tokens_per_second_per_gpu" in proc.stdout and "PASS loss correlation" in proc.stdout
    assert proc.stdout.strip().endswith("gate: PASS (1 candidate(s))")


def test_ten_percent_slower_fails_naming_metric_values_and_threshold(tmp_path: Path, capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys)
    proc = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path, change=_slower(1.10))),
               "--baseline", "tag:accepted", module="evaluate.gate")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "FAIL" in x)
    assert "FAIL tokens_per_second_per_gpu: candidate" in line and "vs baseline" in line
    assert "threshold -5.0% = max(5.0%, baseline spread" in line
    assert "gate: REGRESSION in 1 of 1 candidate(s)" in proc.stdout
    report = tmp_path / "gate.json"
    cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path, change=_slower(1.10))), "--baseline",
        "tag:accepted", "--report", str(report), module="evaluate.gate")
    data = json.loads(report.read_text())
    assert GateReport.model_validate(data).json_text() == report.read_text()  # the typed model, its JSON unchanged
    assert {c["metric"] for c in data["candidates"][0]["checks"]} <= {rule.key for rule in GATE}
    assert data["verdict"] == "regression" and data["exit_code"] == 1
    assert data["candidates"][0]["baseline_run_ids"] == [1, 2, 3]
    first = data["candidates"][0]["checks"][0]
    assert (first["metric"], first["result"]) == ("tokens_per_second_per_gpu", "fail")
    wider = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path, change=_slower(1.10))),
                "--baseline", "tag:accepted", "--throughput-threshold", "0.15", module="evaluate.gate")
    assert wider.returncode == 0, "the threshold is configurable"


def test_a_noisy_baseline_widens_the_threshold_to_its_spread(tmp_path: Path, capsys: Capture) -> None:
    db = str(tmp_path / "history.sqlite")
    files = [make_result(tmp_path / "base", "nvd", "mega", "llama", run_index=k + 1, seed=k, step_time=t)
             for k, t in enumerate((1.5, 1.6, 1.75))]  # runs 15% apart
    assert cli(capsys, "add", "--db", db, *map(str, files)).returncode == 0
    candidate = str(_candidate(tmp_path, change=_slower(1.10), step_time=1.6))
    proc = cli(capsys, "--db", db, "--candidate", candidate, "--baseline", "1,2,3", module="evaluate.gate")
    assert proc.returncode == 0, proc.stdout
    assert "baseline spread 1" in proc.stdout
    strict = cli(capsys, "--db", db, "--candidate", candidate, "--baseline", "1,2,3", "--spread", "off",
                 module="evaluate.gate")
    assert strict.returncode == 1


def test_a_diverging_loss_fails(tmp_path: Path, capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys)
    proc = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path, change=_diverging)),
               "--baseline", "tag:accepted", module="evaluate.gate")
    assert proc.returncode == 1, proc.stdout
    assert "FAIL loss per-step:" in proc.stdout and "at most 10% allowed; worst step" in proc.stdout
    assert "FAIL final loss" in proc.stdout and "threshold 3%" in proc.stdout
    skipped = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path, change=_diverging)),
                  "--baseline", "tag:accepted", "--no-loss", module="evaluate.gate")
    assert skipped.returncode == 0


def test_the_gate_reads_its_thresholds_from_the_rules_table(tmp_path: Path, capsys: Capture,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A threshold planted in train/settings/rules.json's gate rules changes the verdict: no second spelling."""
    db = _baseline(tmp_path, capsys)
    argv = ("--db", db, "--candidate", str(_candidate(tmp_path, change=_diverging)), "--baseline", "tag:accepted")
    assert cli(capsys, *argv, module="evaluate.gate").returncode == 1
    for key, ref in (("loss per-step", 1.0), ("final loss", 10.0)):
        monkeypatch.setitem(RULES, key, dataclasses.replace(RULES[key], ref=ref))
    proc = cli(capsys, *argv, module="evaluate.gate")
    assert proc.returncode == 0, proc.stdout
    assert "at most 100% allowed" in proc.stdout and "threshold 1000%" in proc.stdout


def test_megatron_bridge_tolerances_by_loss_magnitude() -> None:
    assert _tolerance_at(7.0) == (0.10, "loss > 2.0")
    assert _tolerance_at(1.0) == (0.05, "loss > 0.5")
    assert _tolerance_at(0.3) == (0.02, "loss <= 0.5")


def _view(losses: list[float | None], **run) -> RunView:  # type: ignore[no-untyped-def]
    base = {"id": 1, "platform": "nvd", "framework": "mega", "model_label": "llama", "samples_digest": None,
            "source": "x"}
    return RunView({**base, **run}, {"first_step": 1, "step_interval": 1, "skipped_steps": 0,
                                     "losses": json.dumps(losses), "step_times": "[]", "details": "{}"})


def test_loss_rules_on_curves() -> None:
    golden = [8.0 - 0.2 * i for i in range(20)]
    assert all(c.passed for c in check_loss(_view(golden), [_view(golden)]))
    one_off = golden.copy()
    one_off[5] *= 1.5  # one step of 20 out of band: 5%, within the 10% allowed
    checks = {c.metric: c for c in check_loss(_view(one_off), [_view(golden)])}
    assert checks["loss per-step"].passed and checks["final loss"].passed
    assert check_loss(_view([*golden[:-1], None]), [_view(golden)])[0].passed is False
    assert check_loss(_view(golden[:2]), [_view(golden)])[0].passed is None
    other = check_loss(_view(golden, samples_digest="a"), [_view(golden, samples_digest="b")])
    assert other[0].passed is None and "samples digest differs" in other[0].line


def test_baseline_selectors_that_match_nothing_or_several_workloads_are_refused(tmp_path: Path,
                                                                                capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys, count=2)
    other = make_result(tmp_path / "other", "nvd", "mega", "llama", SL="4096")
    assert cli(capsys, "add", "--db", db, "--tag", "mixed", str(other)).returncode == 0
    assert cli(capsys, "tag", "--db", db, "1", "mixed").returncode == 0
    candidate = str(_candidate(tmp_path))
    for selector, message in (("tag:nothing", "matches no run"), ("99", "no run with id 99"),
                              ("tag:mixed", "matches 2 workloads"), ("3", "is another workload")):
        proc = cli(capsys, "--db", db, "--candidate", candidate, "--baseline", selector, module="evaluate.gate")
        assert proc.returncode == 2, (selector, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


def test_last_ok_is_the_last_ok_run_of_the_workload_on_the_device(tmp_path: Path, capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys, count=2)
    failed = make_result(tmp_path / "late", "nvd", "mega", "llama", run_index=5, status="failed")
    assert cli(capsys, "add", "--db", db, str(failed)).returncode == 0
    proc = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path)), module="evaluate.gate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "against baseline #2 (1 run(s))" in proc.stdout
    forged_device = _candidate(tmp_path, "moved", change=lambda d: d["gpu_info"].update(device_name="NVIDIA B200"))
    proc = cli(capsys, "--db", db, "--candidate", str(forged_device), module="evaluate.gate")
    assert proc.returncode == 2 and "on NVIDIA B200 to compare with" in proc.stderr


def test_bad_candidates_are_exit_2(tmp_path: Path, capsys: Capture) -> None:
    db = _baseline(tmp_path, capsys, count=1)
    forged = _candidate(tmp_path, change=lambda d: d.update(schema_version=3))
    proc = cli(capsys, "--db", db, "--candidate", str(forged), module="evaluate.gate")
    assert proc.returncode == 2 and proc.stderr.startswith("gate: candidate refused:")
    amd = _candidate(tmp_path, "amd", platform="amd")
    proc = cli(capsys, "--db", db, "--candidate", str(amd), "--baseline", "1", module="evaluate.gate")
    assert proc.returncode == 2 and "--cross-vendor" in proc.stderr


def test_a_forged_result_is_stored_as_refused_and_never_a_baseline(tmp_path: Path, capsys: Capture) -> None:
    """issue 49: a 1e9x throughput and a -1e18 loss were stored as baselines; a genuine run then failed the gate."""
    from evaluate.history.ingest import add_records
    from evaluate.history.record import make_record
    from evaluate.history.store import open_database
    from utils.result.file import read_result

    db = _baseline(tmp_path, capsys, count=1)  # run #1, genuine
    fast = _candidate(tmp_path, "fast", change=_slower(1e-9))
    negative = _candidate(tmp_path, "negative", change=lambda d: d["loss_values"].__setitem__(-1, -1e18))
    with open_database(db) as opened:  # stored before the gate refused such results: a re-add marks it refused
        add_records(opened, [make_record(read_result(negative), str(negative))])
    proc = cli(capsys, "add", "--db", db, str(fast), str(negative))
    assert proc.returncode == 1 and proc.stderr.count("stored as refused, never a baseline") == 2, proc.stderr
    assert "more than the hardware can do" in proc.stderr and "loss -1e+18 at step 30" in proc.stderr
    listed = json.loads(cli(capsys, "list", "--db", db, "--status", "refused", "--json").stdout)
    assert sorted(r["id"] for r in listed) == [2, 3] and not any(r["baseline_ok"] for r in listed)
    proc = cli(capsys, "--db", db, "--candidate", str(_candidate(tmp_path)), module="evaluate.gate")
    assert proc.returncode == 0 and "against baseline #1 (1 run(s))" in proc.stdout, proc.stdout + proc.stderr
    for args in (("--candidate", str(fast)), ("--candidate-runs", "3")):
        proc = cli(capsys, "--db", db, *args, "--baseline", "1", module="evaluate.gate")
        assert proc.returncode == 2 and proc.stderr.startswith("gate: candidate refused:"), proc.stderr
    genuine = str(_candidate(tmp_path))
    proc = cli(capsys, "--db", db, "--candidate", genuine, "--baseline", "2,3", module="evaluate.gate")
    assert proc.returncode == 2 and "has no run usable as a baseline" in proc.stderr and "refused: " in proc.stderr


def _digest(value: str, init: float = 0.02):  # type: ignore[no-untyped-def]
    def change(data: dict) -> None:
        data["effective_settings"] = {"settings": {"samples_digest": value, "init_method_std": init},
                                      "env": {}, "resolved_by": "test", "reason": None}
    return change


def _compose(*changes):  # type: ignore[no-untyped-def]
    def change(data: dict) -> None:
        for one in changes:
            one(data)
    return change


def test_cross_vendor_equivalence(tmp_path: Path, capsys: Capture) -> None:
    db = str(tmp_path / "history.sqlite")
    nvd = _candidate(tmp_path, "nvd", change=_digest("d1"))
    assert cli(capsys, "add", "--db", db, "--tag", "nvidia", str(nvd)).returncode == 0

    def gate(candidate: Path) -> object:
        return cli(capsys, "--db", db, "--candidate", str(candidate), "--baseline", "tag:nvidia", "--cross-vendor",
                   module="evaluate.gate")

    copy = _candidate(tmp_path, "amd-copy", platform="amd", change=_digest("d1"))  # nvd's arrays, relabelled amd
    proc = gate(copy)
    assert proc.returncode == 2 and "one run relabelled, not two platforms" in proc.stderr, proc.stderr
    same = _candidate(tmp_path, "amd-same", platform="amd", step_time=1.6, change=_digest("d1"))
    proc = gate(same)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS cross-vendor step gap" in proc.stdout and "tolerance 3.22%" in proc.stdout
    drift = _candidate(tmp_path, "amd-drift", platform="amd", step_time=1.6, change=_compose(_digest("d1"), _diverging))
    proc = gate(drift)
    assert proc.returncode == 1, proc.stdout
    assert "FAIL cross-vendor step gap" in proc.stdout and "FAIL cross-vendor tail" in proc.stdout
    for name, change, message in (("no-digest", None, "samples digest is not recorded"),
                                  ("digest", _digest("d2"), "samples digests differ"),
                                  ("init", _digest("d1", 0.01), "initialisation differs")):
        proc = gate(_candidate(tmp_path, name, platform="amd", step_time=1.6, change=change))
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_published_anchor_is_what_the_torchtitan_files_give() -> None:
    """The first and last three of the 100 steps of each file (the full files give 3.22% and 0.311%)."""
    cuda = [8.049097061157227, 7.75183629989624, 7.032886028289795]
    rocm = [8.048333168029785, 7.7511491775512695, 7.032463073730469]
    gaps = curve_gaps([1, 2, 3], rocm, cuda)
    assert gaps.max_step_gap < 1e-3 and gaps.correlation is not None and gaps.correlation > 0.999
    assert (PUBLISHED.max_step_gap, PUBLISHED.tail_gap) == (0.0322, 0.00311)
    assert tolerance() >= (PUBLISHED.max_step_gap, PUBLISHED.tail_gap)
