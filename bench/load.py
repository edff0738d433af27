"""Load figures of the two readers of foreign input: ``evaluate.compare`` on many results, ``evaluate.extract`` on a
long log (issue 26's limits: compare on 10,000 results <= 10 s and <= 700 MB; extract of a 1,000,000-line log
<= 30 s and <= 900 MB, on 2 cores).

Each reader runs as a child, as a user runs it (wall, CPU, peak memory by ``wait4``; the load around it)::

    .venv/bin/python -m bench.load compare --results 10000   # also: extract --lines N, page (<= 15 s), all --quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOBS = [("amd", "mega"), ("amd", "prim"), ("nvd", "mega"), ("nvd", "nemo")]
MODELS = ("llama", "qwen", "mistral")
LIMITS = {"compare": (10.0, 700.0), "extract": (30.0, 900.0), "page": (15.0, None)}  # seconds, MiB


@dataclass
class Child:
    """One child process as it ran: its command, wall and CPU seconds (``wait4``), exit code and the load around it."""

    command: str
    wall_s: float
    cpu_s: float
    exit_code: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def wait_child(proc: subprocess.Popen, command: str, started: float,
               load_before: tuple[float, float, float]) -> tuple[Child, resource.struct_rusage]:
    """Wait for ``proc`` (started at ``perf_counter`` ``started``): its :class:`Child` and ``wait4``'s usage of it."""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    return Child(command, round(wall, 2), round(usage.ru_utime + usage.ru_stime, 2), os.waitstatus_to_exitcode(status),
                 load_before, os.getloadavg()), usage


@dataclass
class Figure(Child):
    """One bench's figure: the child, its peak memory and its limits."""

    bench: str
    size: int
    peak_rss_mib: float
    limit_s: float
    limit_mib: float | None
    ok_codes: tuple[int, ...] = (0,)

    @property
    def within(self) -> bool:
        memory_ok = self.limit_mib is None or self.peak_rss_mib <= self.limit_mib
        return self.exit_code in self.ok_codes and self.wall_s <= self.limit_s and memory_ok


def measure(bench: str, size: int, argv: list[str], limits: tuple[float, float | None],
            ok_codes: tuple[int, ...] = (0,)) -> Figure:
    """Run ``argv`` as a child: its own wall time, CPU time and peak memory (``wait4``'s usage of that child)."""
    load_before = os.getloadavg()
    shown = " ".join(a if a != sys.executable else ".venv/bin/python" for a in argv)
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=errors, text=True)
        child, usage = wait_child(proc, shown, start, load_before)
        if child.exit_code not in ok_codes:
            errors.seek(0)
            print(errors.read()[-2000:], file=sys.stderr)
    return Figure(**vars(child), bench=bench, size=size, peak_rss_mib=round(usage.ru_maxrss / 1024, 1),
                  limit_s=limits[0], limit_mib=limits[1], ok_codes=ok_codes)


def job_results(folder: Path, steps: int) -> list[Path]:
    """One result of ``steps`` steps per job and model, built through the real API (the benches' templates)."""
    sys.path.insert(0, str(REPO))
    from tests.helpers.evaluate import make_result

    return [make_result(folder, platform, framework, model, seed=index, TRAIN_ITERS=str(steps), WARMUP_STEPS="5",
                        MEASURE_SKIP_STEPS="5")
            for index, (platform, framework) in enumerate(JOBS) for model in MODELS]


def make_results(folder: Path, count: int) -> None:
    """``count`` result files: one per job and model, the rest their repeat runs."""
    templates = []
    for path in job_results(folder, 100):
        templates.append((path, json.loads(path.read_text())))
        path.unlink()
    for k in range(count):
        path, data = templates[k % len(templates)]
        run = k // len(templates) + 1
        data["run_index"] = run
        (folder / f"{path.stem}_r{run}.json").write_text(json.dumps(data))


def make_log(path: Path, lines: int) -> None:
    """A Megatron-LM log of ``lines`` iteration lines (the format of tests/fixtures/logs/megatron_*.log)."""
    with path.open("w") as log:
        for i in range(1, lines + 1):
            ms = 1985.0 + (i * 7919) % 13
            log.write(f" iteration {i:8d}/{lines:8d} | consumed samples: {i * 64:12d} | elapsed time per iteration "
                      f"(ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 398.{i % 10} | learning rate: "
                      f"3.000000E-04 | global batch size:    64 | lm loss: {11.0 - 3.0 * i / lines:.6E} | "
                      "loss scale: 1.0 | grad norm: 3.142 | number of skipped iterations:   0 | "
                      "number of nan iterations:   0 |\n")


def bench_compare(count: int, work: Path) -> Figure:
    results = work / "results"
    make_results(results, count)
    return measure("compare", count, [sys.executable, "-m", "evaluate.compare", "--results-dir", str(results),
                                      "--output-dir", str(work / "compare-out"), "--allow-mismatch"],
                   LIMITS["compare"])


def bench_page(count: int, work: Path) -> Figure:
    """The report page (evaluate/report_html/) over the same results as compare; no results database."""
    results = work / "results"
    if not results.is_dir():
        make_results(results, count)
    return measure("page", count, [sys.executable, "-m", "evaluate.report_html", "--results-dir", str(results),
                                   "--output", str(work / "page-out" / "report.html"), "--db", "off"], LIMITS["page"])


def bench_extract(lines: int, work: Path) -> Figure:
    log = work / "megatron.log"
    make_log(log, lines)
    return measure("extract", lines, [sys.executable, "-m", "evaluate.extract", str(log), "--from-log",
                                      "--platform", "amd", "--framework", "mega", "--model", "llama",
                                      "--output-dir", str(work / "extract-out")], LIMITS["extract"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=("compare", "extract", "page", "all"), help="all: compare and extract")
    parser.add_argument("--results", type=int, default=10_000, help="result files for compare (default 10000)")
    parser.add_argument("--lines", type=int, default=1_000_000, help="log lines for extract (default 1000000)")
    parser.add_argument("--quick", action="store_true", help="one result per job, 500 lines: a smoke test")
    args = parser.parse_args(argv)
    results, lines = (len(JOBS) * len(MODELS), 500) if args.quick else (args.results, args.lines)
    figures = []
    with tempfile.TemporaryDirectory(prefix="tprimat-load-") as tmp:
        if args.which in ("compare", "all"):
            figures.append(bench_compare(results, Path(tmp)))
        if args.which == "page":
            figures.append(bench_page(results, Path(tmp)))
        if args.which in ("extract", "all"):
            figures.append(bench_extract(lines, Path(tmp)))
    for figure in figures:
        print(json.dumps({**asdict(figure), "within_limits": figure.within}))
    return 0 if all(f.exit_code == 0 for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
