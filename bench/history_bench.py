"""Figures of the results database and the gate (issue 36), and the cpu loss noise the cross-vendor gate uses.

``add`` (10,000 results <= 30 s, 500 MiB), ``trend --png`` over 100,000 stored runs (<= 5 s) and ``gate`` of a
500-step candidate against 10 runs (<= 2 s) run as children (``bench/load.py``'s ``measure``); ``noise`` trains tiny
Llama with ``tran`` and ``deep`` and 1 and 2 threads: the figures ``evaluate/history/noise.py`` records::

    .venv/bin/python -m bench.history_bench all        # --quick: small inputs; noise --steps 50: minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from bench.load import Figure, job_results, make_results, measure
from evaluate.history.ingest import add_records
from evaluate.history.noise import curve_gaps
from evaluate.history.record import make_record
from evaluate.history.store import open_database
from utils.result.file import read_result, status_of

REPO = Path(__file__).resolve().parent.parent
LIMITS = {"add": (30.0, 500.0), "trend": (5.0, None), "gate": (2.0, None)}  # seconds, MiB


def bench_add(count: int, work: Path) -> Figure:
    results = work / "results"
    make_results(results, count)
    return measure("add", count, [sys.executable, "-m", "evaluate.history", "add", str(results),
                                  "--db", str(work / "add.sqlite")], LIMITS["add"])


def _records(count: int, steps: int):  # type: ignore[no-untyped-def]
    """``count`` stored-form records over 12 series, made from real results by changing their keys only."""
    with tempfile.TemporaryDirectory() as tmp:
        templates = [make_record(read_result(path), str(path)) for path in job_results(Path(tmp), steps)]
    start = 1_700_000_000
    for k in range(count):
        base = templates[k % len(templates)]
        moment = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(start + k * 600))
        run = {**base.run, "content_hash": f"{k:064x}", "run_time": moment, "finished_at": moment,
               "tokens_per_second_per_gpu": base.run["tokens_per_second_per_gpu"] * (1 + 0.01 * ((k * 7919) % 5)),
               "versions": json.dumps({"torch": f"2.{k // 1000}.0"})}
        yield replace(base, run=run)


def bench_trend(count: int, work: Path) -> Figure:
    db_path = work / "trend.sqlite"
    with open_database(str(db_path), create=True) as db:
        batch = []
        for record in _records(count, 100):
            batch.append(record)
            if len(batch) == 20_000:
                add_records(db, batch)
                batch = []
        add_records(db, batch)
    return measure("trend", count, [sys.executable, "-m", "evaluate.history", "trend", "--db", str(db_path),
                                    "--png", str(work / "trend.png")], LIMITS["trend"])


def bench_gate(steps: int, work: Path) -> Figure:
    sys.path.insert(0, str(REPO))
    from tests.helpers.evaluate import make_result

    db_path = work / "gate.sqlite"
    records = [r for r in _records(12 * 11, steps) if r.run["platform"] == "nvd" and r.run["framework"] == "mega"
               and r.run["model"] == "llama"][:10]
    with open_database(str(db_path), create=True) as db:
        add_records(db, records, ["bench-baseline"])
    candidate = make_result(work / "candidate", "nvd", "mega", "llama", seed=2, TRAIN_ITERS=str(steps),
                            WARMUP_STEPS="5", MEASURE_SKIP_STEPS="5")
    return measure("gate", steps, [sys.executable, "-m", "evaluate.gate", "--db", str(db_path), "--candidate",
                                   str(candidate), "--baseline", "tag:bench-baseline"], LIMITS["gate"],
                   ok_codes=(0, 1))


def _train(env: dict[str, str], output: Path, frameworks: str, one_core: bool) -> None:
    argv = ["bash", str(REPO / "shell" / "train.sh")]
    if one_core:
        argv = ["taskset", "-c", "0", *argv]
    run_env = {**env, "OUTPUT_DIR": str(output), "FRAMEWORK": frameworks}
    proc = subprocess.run(argv, cwd=REPO, env=run_env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"shell/train.sh ({frameworks}) exited {proc.returncode}: {proc.stderr[-2000:]}")


def bench_noise(steps: int, work: Path, data_dir: Path | None) -> dict:
    """Train tiny Llama with tran and deep (2 threads) and tran (1 thread); the pairwise loss gaps."""
    from tests.conftest import tiny_environ

    data = data_dir or work / "data"
    env = tiny_environ(data, work / "out", MODELS="llama", TRAIN_ITERS=str(steps), WARMUP_STEPS="5",
                       HISTORY_DB="off")
    if data_dir is None:
        proc = subprocess.run(["bash", str(REPO / "shell" / "data.sh")], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"shell/data.sh exited {proc.returncode}: {proc.stderr[-2000:]}")
    finished = [status_of(work / "two" / f"train_cpu_{name}_llama.json") == "ok" for name in ("tran", "deep")]
    if not all(finished):  # a kept work folder (--keep) reuses finished runs
        _train(env, work / "two", "tran deep", one_core=False)
    if status_of(work / "one" / "train_cpu_tran_llama.json") != "ok":
        _train(env, work / "one", "tran", one_core=True)
    curves = {}
    for name, path in (("tran", work / "two" / "train_cpu_tran_llama.json"),
                       ("deep", work / "two" / "train_cpu_deep_llama.json"),
                       ("tran_1_thread", work / "one" / "train_cpu_tran_llama.json")):
        result = read_result(path)
        curves[name] = (result.loss_values, result.environment.variables.get("OMP_NUM_THREADS"))
    out = {"steps": steps, "threads": {k: v[1] for k, v in curves.items()}}
    for label, (a, b) in {"deep_vs_tran": ("deep", "tran"), "threads_1_vs_2": ("tran_1_thread", "tran")}.items():
        xs, ys = curves[a][0], curves[b][0]
        pairs = [(i + 1, x, y) for i, (x, y) in enumerate(zip(xs, ys, strict=False)) if x is not None and y is not None]
        gaps = curve_gaps([p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs])
        out[label] = asdict(gaps)
    out["first_losses"] = {k: v[0][:3] for k, v in curves.items()}
    out["last_losses"] = {k: v[0][-3:] for k, v in curves.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.history_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=("add", "trend", "gate", "all", "noise"))
    parser.add_argument("--results", type=int, default=10_000, help="result files to add (default 10000)")
    parser.add_argument("--runs", type=int, default=100_000, help="stored runs for trend (default 100000)")
    parser.add_argument("--steps", type=int, default=500, help="candidate steps for gate (default 500); "
                        "training steps for noise (default there: 50)")
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke test of the bench")
    parser.add_argument("--data-dir", type=Path, help="noise: an existing tiny sample DATA_DIR to reuse")
    parser.add_argument("--keep", type=Path, help="keep the work folder here (databases, PNG, results)")
    args = parser.parse_args(argv)
    results, runs, steps = (24, 240, 50) if args.quick else (args.results, args.runs, args.steps)
    work_root = args.keep or Path(tempfile.mkdtemp(prefix="tprimat-history-bench-"))
    work_root.mkdir(parents=True, exist_ok=True)
    try:
        if args.which == "noise":
            print(json.dumps(bench_noise(steps if args.steps != 500 else 50, work_root, args.data_dir)))
            return 0
        figures = []
        if args.which in ("add", "all"):
            figures.append(bench_add(results, work_root))
        if args.which in ("trend", "all"):
            figures.append(bench_trend(runs, work_root))
        if args.which in ("gate", "all"):
            figures.append(bench_gate(steps, work_root))
    finally:
        if args.keep is None:
            shutil.rmtree(work_root, ignore_errors=True)
    for figure in figures:
        print(json.dumps({**asdict(figure), "within_limits": figure.within}))
    return 0 if all(f.exit_code in (0, 1) for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
