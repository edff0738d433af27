"""Where tprimat's time goes between the jobs of ``shell/gpu_check.sh --native``, measured as whole processes.

Parts, each a child with its public command: ``imports`` (the interpreter, torch, megatron.core, a tokenizer, a config
Python, torchrun's start), ``preflight`` of each framework (digest store emptied, then again) and ``launch`` (each
launcher with the check's workload, its lines time-stamped: without a GPU the framework stops at its first CUDA call,
so the launcher is what is measured). Wall and CPU seconds (``wait4``, ``/proc/<pid>/stat``), load around each::

    PLATFORM=nvd .venv/bin/python -m bench.startup --frameworks tran deep mega --out startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.load import Child, wait_child
from utils.config.load import load_config
from utils.config.rules import ConfigError
from utils.dataset.paths import tokenizer_dir
from utils.io.atomic import atomic_write_text
from utils.io.signals import answer_signals
from utils.machine.hardware import cpu_name

REPO = Path(__file__).resolve().parent.parent
PARTS = ("imports", "preflight", "launch")
# shell/gpu_check.sh's workload (its `export` line), so the launcher plans exactly the check's jobs.
GPU_CHECK_WORKLOAD = {"MODEL_LAYERS": "8", "MODELS": "llama", "MODEL_SIZE": "full", "PROFILE": "identical",
                      "RUNS": "1", "TRAIN_ITERS": "30", "WARMUP_STEPS": "5", "MEASURE_SKIP_STEPS": "3", "SL": "2048",
                      "MBS": "2", "GA": "4", "DP": "1", "TP": "1", "PP": "1", "CP": "1", "NNODES": "1",
                      "NODE_RANK": "0", "GPUS_PER_NODE": "1"}
PREFLIGHT_LINE = "tprimat: preflight of "


@dataclass
class Figure(Child):
    """One child process; for a launcher, when its preflight and framework-start lines came (s from its start)."""

    part: str
    what: str
    to_preflight_s: float | None = None
    to_framework_s: float | None = None
    cpu_to_preflight_s: float | None = None
    cpu_to_framework_s: float | None = None
    notes: list[str] = field(default_factory=list)


def run_child(part: str, what: str, argv: list[str], cwd: Path, env: dict[str, str],
              marks: dict[str, str] | None = None, timeout_s: float = 1800.0) -> Figure:
    """Run ``argv`` as a child; its wall and CPU time (``wait4``), and when each of ``marks`` (name -> the start of a
    line of its output) first came, in seconds from its start."""
    load_before = os.getloadavg()
    seen: dict[str, float] = {}
    cpu: dict[str, float | None] = {}
    tail: list[str] = []
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1, start_new_session=True)
    killer = threading.Timer(timeout_s, lambda: os.killpg(proc.pid, signal.SIGKILL))
    killer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter() - start
            for name, prefix in (marks or {}).items():
                if name not in seen and line.startswith(prefix):
                    seen[name] = round(now, 2)
                    cpu[name] = process_cpu_s(proc.pid)
            tail = [*tail[-9:], line.rstrip()]
        shown = shlex.join("python" if a == sys.executable else a for a in argv)
        child, _ = wait_child(proc, shown, start, load_before)
    finally:
        killer.cancel()
    figure = Figure(**vars(child), part=part, what=what, to_preflight_s=seen.get("preflight"),
                    to_framework_s=seen.get("framework"), cpu_to_preflight_s=cpu.get("preflight"),
                    cpu_to_framework_s=cpu.get("framework"))
    if child.exit_code != 0:
        figure.notes.append(f"exit {child.exit_code}: {tail[-1] if tail else 'no output'}")
    return figure


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of a running process so far: its own user + system time and that of its children it has waited
    for (``/proc/<pid>/stat`` fields 14-17); None where ``/proc`` cannot tell."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    ticks = sum(int(value) for value in fields[11:15])
    return round(ticks / os.sysconf("SC_CLK_TCK"), 2)


def import_parts(python: str, repo: Path, env: dict[str, str], tokenizer: Path | None,
                 quick: bool = False) -> list[Figure]:
    """The fixed costs every fresh Python of the check pays, one child each (``quick``: the interpreter and a config
    Python only)."""
    parts = [("interpreter alone", [python, "-c", "pass"]),
             ("import torch", [python, "-c", "import torch"]),
             ("import megatron.core", [python, "-c", "import megatron.core"]),
             ("a config Python of shell/train.sh", [python, "-m", "utils.config.load", "--get", "OUTPUT_DIR"]),
             ("torchrun's own start (no-op worker)", [python, "-m", "torch.distributed.run", "--standalone",
                                                      "--nnodes", "1", "--nproc-per-node", "1", "--no-python",
                                                      "true"])]
    if quick:
        parts = [parts[0], parts[3]]
    elif tokenizer is not None:
        parts.insert(3, ("a tokenizer load (transformers imported)",
                         [python, "-c", "import sys; from utils.dataset.paths import load_tokenizer; "
                                        "load_tokenizer(sys.argv[1])", str(tokenizer)]))
    return [run_child("imports", what, argv, repo, env) for what, argv in parts]


def empty_store(data_dir: Path | None) -> None:
    """Remove the samples-digest store of ``data_dir`` (a cache: utils/dataset/digest_cache.py), as on a fresh node."""
    if data_dir is not None and (data_dir / ".tprimat" / "samples").is_dir():
        shutil.rmtree(data_dir / ".tprimat" / "samples")


def preflight_parts(python: str, repo: Path, env: dict[str, str], platform: str, frameworks: list[str], model: str,
                    data_dir: Path | None) -> list[Figure]:
    """Each framework's preflight with the digest store emptied first (a fresh node), then once more."""
    figures = []
    for framework in frameworks:
        empty_store(data_dir)
        argv = [python, "-m", "train.launch.preflight", "--platform", platform, "--framework", framework,
                "--model", model]
        for state in ("store empty", "again"):
            figures.append(run_child("preflight", f"{framework} preflight, {state}", argv, repo, env))
    return figures


def launch_parts(python: str, repo: Path, env: dict[str, str], platform: str, frameworks: list[str],
                 model: str, data_dir: Path | None, keep_store: bool = False) -> list[Figure]:
    """The check's launchers in its order, one fresh OUTPUT_DIR for all (as the check has), the digest store
    emptied first (a fresh node, as the lent machines are) unless ``keep_store``."""
    if not keep_store:
        empty_store(data_dir)
    figures = []
    with tempfile.TemporaryDirectory(prefix="tprimat-startup-") as output:
        job_env = {**env, "OUTPUT_DIR": output}
        for framework in frameworks:
            argv = [python, "-m", "train.launch", "--platform", platform, "--framework", framework, "--model", model]
            marks = {"preflight": PREFLIGHT_LINE, "framework": f"tprimat: {platform}/{framework}/{model}: "}
            figure = run_child("launch", f"{framework} launcher", argv, repo, job_env, marks)
            if figure.to_framework_s is None:
                figure.notes.append("the framework was not started (see the exit line)")
            figures.append(figure)
    return figures


def table(figures: list[Figure]) -> str:
    """The figures as a Markdown table, the command beside each."""
    rows = ["| part | what | wall s | CPU s | to preflight s [CPU] | to framework s [CPU] | exit | load 1 min "
            "| command |", "|---|---|---|---|---|---|---|---|---|"]

    def mark(wall: float | None, cpu: float | None) -> str:
        return "" if wall is None else f"{wall:.2f}" + ("" if cpu is None else f" [{cpu:.2f}]")

    for f in figures:
        cells = [f.part, f.what, f"{f.wall_s:.2f}", f"{f.cpu_s:.2f}", mark(f.to_preflight_s, f.cpu_to_preflight_s),
                 mark(f.to_framework_s, f.cpu_to_framework_s), str(f.exit_code), f"{f.load_before[0]:.1f}",
                 f"`{f.command}`"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.startup", description=__doc__.split("\n\n")[0],
        epilog="Exit 0 when every figure was taken (a framework stopped at its missing GPU counts as taken), "
               "2 on bad input. Figures as JSON lines, then a Markdown table.")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--frameworks", nargs="+", default=["tran", "deep", "mega"])
    parser.add_argument("--model", default="llama")
    parser.add_argument("--platform", default=os.environ.get("PLATFORM") or "nvd",
                        help="the launcher's --platform (default PLATFORM, else nvd: the check's NVIDIA path)")
    parser.add_argument("--workload", choices=("gpu_check", "env"), default="gpu_check",
                        help="gpu_check: shell/gpu_check.sh's exports over the environment; env: the environment")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose commands run (default this one)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs them (default this one)")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here (atomically)")
    parser.add_argument("--keep-store", action="store_true",
                        help="launch with the samples-digest store as it is (default: emptied first, a fresh node)")
    parser.add_argument("--quick", action="store_true", help="imports only the interpreter and a config Python")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    if not (repo / "train" / "launch").is_dir():
        print(f"bench.startup: {repo} is not a tprimat checkout (no train/launch)", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PLATFORM": args.platform,
           "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)}
    if args.workload == "gpu_check":
        env.update(GPU_CHECK_WORKLOAD)
    try:
        cfg = load_config(environ=env)
    except ConfigError as exc:
        print(f"bench.startup: config error: {exc}", file=sys.stderr)
        return 2
    tokenizer = tokenizer_dir(cfg, args.model)
    figures: list[Figure] = []
    if "imports" in args.parts:
        figures += import_parts(args.python, repo, env, tokenizer if tokenizer.is_dir() else None, args.quick)
    if "preflight" in args.parts:
        figures += preflight_parts(args.python, repo, env, args.platform, args.frameworks, args.model, cfg.data_dir)
    if "launch" in args.parts:
        figures += launch_parts(args.python, repo, env, args.platform, args.frameworks, args.model, cfg.data_dir,
                                args.keep_store)
    head = {"cpu": cpu_name(), "cores": os.cpu_count(), "repo": str(repo),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "platform": args.platform,
            "workload": args.workload}
    for figure in figures:
        print(json.dumps(asdict(figure)))
    print(table(figures))
    if args.out is not None:
        atomic_write_text(args.out, json.dumps({**head, "figures": [asdict(f) for f in figures]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    answer_signals("bench.startup")
    sys.exit(main())
