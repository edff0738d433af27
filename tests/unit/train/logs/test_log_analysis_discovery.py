"""Discovery: ``python -m evaluate.extract DIR`` finds the runs in a folder of copied logs, one result per run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.analysis.fairness import check_fairness
from evaluate.analysis.results import load_directory
from tests.fixtures.logs.generate_foreign import LLAMA, megatron_args, megatron_line
from tests.helpers.events import write_lightning_events, write_megatron_events
from tests.helpers.megatron import FIXTURES
from train.logs.discover import discover, run_key
from utils.config.model import REPO_ROOT

FOREIGN = FIXTURES / "foreign"
PRIMUS_RUN = "primus_llama_run/output/amd/tprimat/llama3.1_8B-pretrain/logs/pre_trainer/rank-*"


@pytest.mark.parametrize("path, key", [
    ("exp/logs/pre_trainer/rank-0/debug.log", "exp/logs/pre_trainer/rank-*"),
    ("exp/logs/pre_trainer/rank-7/info.log", "exp/logs/pre_trainer/rank-*"),
    ("job/run1/attempt_0/3/stderr.log", "job/run1/attempt_0/*"),
    ("out/logs/train_amd_mega_llama_node1.log", "out/logs/train_amd_mega_llama_node*.log"),
    ("nemo/nemo_log_globalrank-5_localrank-5.txt", "nemo/nemo_log_globalrank-*_localrank-*.txt"),
    ("runs/rank_12.log", "runs/rank_*.log"),
    ("single/train.log", "single/train.log"),
])
def test_per_rank_and_per_node_logs_share_one_key(path: str, key: str) -> None:
    assert run_key(Path(path)) == key


def torchrun_run(root: Path, oom: bool) -> None:
    """torchrun --log-dir layout: rank 0 prints the arguments, rank 7 the iterations, rank 3 maybe an OOM."""
    attempt = root / "attempt_0"
    lines = ["node02:77:77 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
             *megatron_args(LLAMA, seq=2048, mbs=1, gbs=64, tp=1, dp=8, iters=20, lr=0.0003, warm=2, world=8)]
    iterations = 5 if oom else 20
    for rank, name, text in [
        (0, "stdout.log", lines),
        (7, "stdout.log", [megatron_line(i, 20, LLAMA, seq=2048, gbs=64, world=8, peak=3e-4, warm=2)
                           for i in range(1, iterations + 1)]),
        (3, "stderr.log", ["Traceback (most recent call last):",
                           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"] if oom else []),
    ]:
        (attempt / str(rank)).mkdir(parents=True, exist_ok=True)
        (attempt / str(rank) / name).write_text("\n".join(text) + "\n" if text else "")


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """An ``nvi-logs``/``amd-logs``-like tree: every kind of log, event files, and things that are not logs."""
    root = tmp_path / "copied-logs"
    shutil.copytree(FOREIGN, root / "amd-logs")
    torchrun_run(root / "nvi-logs" / "llama_ok", oom=False)
    torchrun_run(root / "nvi-logs" / "llama_oom", oom=True)
    write_megatron_events(root / "nvi-logs" / "tensorboard" / "llama_tb")
    write_lightning_events(root / "nvi-logs" / "nemo" / "tb_logs" / "version_0", steps=40, every=1)
    (root / "notes.txt").write_text("what I ran last week\n")
    (root / "nvi-logs" / "model.pt").write_bytes(bytes(range(256)) * 8)
    return root


def extract_folder(folder: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    return subprocess.run([sys.executable, "-m", "evaluate.extract", str(folder), "--output-dir", str(out), *args],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_discovery_groups_runs_and_skips_non_logs(folder: Path) -> None:
    found = discover(folder)
    keys = {run.key: run for run in found.runs}
    primus = keys[f"amd-logs/{PRIMUS_RUN}"]
    assert [p.relative_to(folder).parts[-2:] for p in primus.files] == [
        ("rank-0", "debug.log"), ("rank-0", "info.log"), ("rank-7", "debug.log"), ("rank-7", "info.log")]
    oom = keys["nvi-logs/llama_oom/attempt_0/*"]
    assert [p.parent.name for p in oom.files] == ["0", "3", "7"]
    assert keys["nvi-logs/tensorboard/llama_tb/events.*"].kind == "tensorboard"
    skipped = {(str(p.relative_to(folder)), reason.split(" (")[0]) for p, reason in found.skipped}
    assert skipped == {("nvi-logs/model.pt", "binary file"), ("nvi-logs/llama_ok/attempt_0/3/stderr.log", "empty file")}


def test_folder_mode_writes_one_result_per_run_and_a_table(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = extract_folder(folder, out, "--model", "llama")
    assert proc.returncode == 1, proc.stderr  # some runs cannot be used: their rows say why
    table = proc.stdout
    for expected in ("amd-logs/megatron_contradiction.log", "unusable", "contradicts itself",
                     "amd-logs/megatron_old_noargs.log", "pass --platform", "notes.txt", "model.pt",
                     "binary file", "nvi-logs/llama_oom/attempt_0/*", "failed: out of memory",
                     "--model llama does not match the log's model"):
        assert expected in table, expected
    loaded = load_directory(out)
    assert not loaded.skipped
    by_name = {r.path.name: r.result for r in loaded.results}
    assert set(by_name) == {
        "train_nvd_mega_llama_from-amd-logs-megatron-core012-gbs128-llama.json",
        "train_nvd_mega_llama_from-amd-logs-megatron-resumed-llama.json",
        "train_amd_prim_llama_from-tprimat-llama3.1-8B-pretrain.json",
        "train_amd_prim_llama_from-amd-logs-primus-llama-console.json",
        "train_nvd_nemo_llama_from-amd-logs-nemo-console-llama.json",
        "train_nvd_mega_llama_from-nvi-logs-llama-ok.json",
        "train_nvd_mega_llama_from-nvi-logs-llama-oom.json",
        "train_nvd_nemo_llama_from-nvi-logs-nemo.json",
    }
    primus = by_name["train_amd_prim_llama_from-tprimat-llama3.1-8B-pretrain.json"]
    assert primus.training_config.workload.SL == 8192  # from rank 0's arguments block, iterations from rank 7
    assert primus.status == "ok" and len(primus.source.files) == 4
    oom = by_name["train_nvd_mega_llama_from-nvi-logs-llama-oom.json"]
    assert oom.status == "failed" and "out of memory" in oom.error and len(oom.step_times) == 5
    assert by_name["train_nvd_mega_llama_from-nvi-logs-llama-ok.json"].status == "ok"
    assert by_name["train_nvd_nemo_llama_from-nvi-logs-nemo.json"].source.kind == "tensorboard"
    with_platform = extract_folder(folder, tmp_path / "nvd", "--model", "llama", "--platform", "nvd")
    assert "train_nvd_mega_llama_from-tensorboard-llama-tb.json" in with_platform.stdout


def test_results_from_logs_flow_into_fairness_as_cannot_verify(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    extract_folder(folder, out, "--model", "llama")
    report = check_fairness(load_directory(out).results)
    unverifiable = {d.key for d in report.differences if d.unverifiable}
    assert {"DATASET", "DATA_SAMPLES", "data hash", "tokenizer hash"} <= unverifiable
    assert not report.fair


def test_a_folder_of_good_runs_exits_0(tmp_path: Path) -> None:
    root = tmp_path / "good"
    torchrun_run(root / "run_a", oom=False)
    write_lightning_events(root / "run_b" / "tb_logs" / "version_0")
    proc = extract_folder(root, tmp_path / "out", "--model", "llama")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list((tmp_path / "out").glob("train_*.json"))) == 2
    assert "2 result(s) written" in proc.stderr
