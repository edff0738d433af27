"""The goldens that keep a refactor pure (issue 47): every dry run, preflight record and compare/page output.

``python -m tests.golden.capture --write`` records them in ``tests/golden/out/``; ``--check`` (what
tests/golden/test_goldens.py runs) produces them again and names the first file that differs.
Everything runs in this process in a throwaway workspace: the frameworks are tests/fakes/'s recording
stand-ins, the compared results are the frozen files of ``tests/golden/inputs/`` (written once by
``--inputs`` through the result API, then never regenerated, so a change of that API cannot move them).
Paths, the interpreter and times are replaced by placeholders; nothing else is normalised.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

GOLDEN = Path(__file__).resolve().parent
OUT = GOLDEN / "out"
INPUTS = GOLDEN / "inputs"
PROFILES = ("identical", "tuned", "mlperf")
FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"
# The workload of every dry run: the real model shapes on 8 GPUs, a short sequence so that each job's sample digest
# (the first two global batches of the sample data, tests/conftest.py's build) is quick.
WORKLOAD = {
    "TRAIN_ITERS": "20", "WARMUP_STEPS": "4", "MBS": "1", "DP": "8", "GA": "2", "TP": "1", "PP": "1", "CP": "1",
    "SL": "256", "GPUS_PER_NODE": "8", "NNODES": "1", "NODE_RANK": "0", "MODEL_SIZE": "full", "DATASET": "sample",
    "MEASURE_SKIP_STEPS": "", "FP8": "false", "PRECISION": "bf16", "MEGATRON_PATH": "", "PRIMUS_PATH": "",
    "MEGATRON_REF": FAKE_COMMIT, "HISTORY_DB": "off", "MASTER_PORT": "29517",
    # the data settings the sample build was made with (tests/helpers/workload.py), or no dataset is usable
    "SAMPLE_MB": "0.5", "SAMPLE_VOCAB": "2048", "MODELS": "llama qwen mistral",
    # auto reads the host's CPU flags (bf16 where it has avx512_bf16): the goldens were recorded as fp32
    "CPU_PRECISION": "fp32",
}
# Modules a refactor moved, as the outputs cite them: applied to the recorded goldens before comparing, so that a
# move is the only difference a pure refactor may show (issue 47).
MOVED = {
    "utils/config/models.py": "utils/spec/models.py",
    "evaluate/convergence.py": "evaluate/analysis/convergence.py",
}
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


def _normalise(text: str, work: Path) -> str:
    from tests.helpers.paths import REPO

    for path, name in ((work, "<WORK>"), (REPO, "<REPO>"), (Path(sys.executable), "<PYTHON>")):
        text = text.replace(str(path), name)
    text = re.sub(re.escape(tempfile.gettempdir()) + r"/[\w.-]+", "<TMP>", text)  # a tool's own scratch folder
    return _ADDRESS.sub("0x<ADDRESS>", _TIME.sub("<TIME>", text))


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """os.environ as a launched job sees it: no tprimat, device or config keys from the caller, plus ``values``."""
    from tests.helpers.shell import CONFIG_KEYS

    saved = dict(os.environ)
    drop = ("TPRIMAT_", "NCCL_", "RCCL_", "HSA_", "HIP_", "NVTE_", "CUDA_", "ROCR_")
    for key in list(os.environ):
        if key in CONFIG_KEYS or key == "HF_TOKEN" or key.startswith(drop):
            del os.environ[key]
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _captured(main: Callable[[list[str]], int | None], argv: list[str]) -> str:
    """A CLI's ``main(argv)`` run here: its exit status, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
    return f"exit: {code}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


def build_sample_data(data: Path) -> Path:
    """The suite's sample data (tests/conftest.py's ``sample_data_dir`` is the same build), made by shell/data.sh."""
    import subprocess

    from tests.helpers.paths import REPO
    from tests.helpers.workload import tiny_environ

    proc = subprocess.run(["bash", str(REPO / "shell" / "data.sh")], env=tiny_environ(data, data.parent / "scratch"),
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"golden: shell/data.sh failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return data


def _workspace(work: Path, data_source: Path | None) -> dict[str, str]:
    """The stand-in frameworks and the sample data every dry run reads; returns the job environment."""
    from tests.helpers.paths import FAKES
    from tests.helpers.preflight import fake_megatron, fake_primus

    data = work / "data"
    megatron, primus = fake_megatron(work), fake_primus(work)
    if data_source is None:
        build_sample_data(data)
    else:
        shutil.copytree(data_source, data)
    return {
        **WORKLOAD, "DATA_DIR": str(data), "OUTPUT_DIR": str(work / "output"), "HOME": str(work / "home"),
        "TPRIMAT_MEGATRON_LM": str(megatron), "TPRIMAT_PRIMUS": str(primus),
        "TPRIMAT_MEGATRON_PYTHON": sys.executable, "TPRIMAT_NEMO_PYTHON": str(FAKES / "nemo_python"),
        "TPRIMAT_FAKE_REAL_PYTHON": sys.executable, "TPRIMAT_FAKE_RECORD": str(work / "record.json"),
    }


def _jobs() -> list[tuple[str, str, str]]:
    from utils.spec.registry import frameworks_on, model_names, platform_names

    return [(p, f, m) for p in platform_names() for f in frameworks_on(p) for m in model_names()]


def launches(work: Path, data_source: Path | None) -> dict[str, str]:
    """Each job's dry run under every profile, and its preflight under the identical one."""
    from tests.helpers.paths import REPO
    from train.launch.launcher import main as launch_main

    env = _workspace(work, data_source)
    found: dict[str, str] = {}
    cwd = os.getcwd()
    os.chdir(REPO)
    # A cpu job is sized against the host's memory (utils/measure/memory.py): unknown here, so the goldens are the
    # same on every host; tests/unit/measure/test_memory.py holds that check.
    unknown_host = mock.patch("utils.measure.memory.host_memory_gib", return_value=None)
    try:
        unknown_host.start()
        for platform, framework, model in _jobs():
            argv = ["--platform", platform, "--framework", framework, "--model", model]
            name = f"{platform}_{framework}_{model}"
            for profile in PROFILES:
                with _environ({**env, "PROFILE": profile}):
                    found[f"dry_run/{name}_{profile}.txt"] = _captured(launch_main, [*argv, "--dry-run"])
            with _environ({**env, "PROFILE": "identical"}):
                record = work / "record.json"
                record.unlink(missing_ok=True)
                text = _captured(launch_main, [*argv, "--preflight"])
                recorded = record.read_text(encoding="utf-8") if record.exists() else "(no record)\n"
                found[f"preflight/{name}.txt"] = f"{text}--- record\n{recorded}"
    finally:
        unknown_host.stop()
        os.chdir(cwd)
    return {name: _normalise(text, work) for name, text in found.items()}


def comparisons(work: Path) -> dict[str, str]:
    """compare (console, compare.md), validate and the page over each frozen input folder."""
    import matplotlib

    from evaluate.compare import main as compare_main
    from evaluate.report_html.cli import main as page_main
    from evaluate.validate import main as validate_main

    matplotlib.rcParams["svg.hashsalt"] = "tprimat-golden"  # the page's SVG ids are random otherwise
    found: dict[str, str] = {}
    for folder in sorted(p for p in INPUTS.iterdir() if p.is_dir()):
        results = work / "compare" / folder.name
        shutil.copytree(folder, results)
        with _environ({"HISTORY_DB": "off", "OUTPUT_DIR": str(results), "MPLBACKEND": "Agg"}):
            found[f"compare/{folder.name}/console.txt"] = _captured(
                compare_main, ["--results-dir", str(results), "--price-per-gpu-hour", "amd=2.5", "nvd=3.0"])
            files = sorted(str(p) for p in results.glob("train_*.json"))
            found[f"compare/{folder.name}/validate.txt"] = _captured(validate_main, files)
            found[f"compare/{folder.name}/page_console.txt"] = _captured(
                page_main, ["--results-dir", str(results), "--db", "off", "--price-per-gpu-hour", "amd=2.5", "nvd=3.0"])
        for name in ("compare.md", "report.html"):
            path = results / name
            found[f"compare/{folder.name}/{name}"] = path.read_text(encoding="utf-8") if path.exists() else "(none)\n"
    return {name: _normalise(text, work) for name, text in found.items()}


def produce(data_source: Path | None = None) -> dict[str, str]:
    """Every golden text by name; ``data_source``: a built sample data folder to copy (else built here)."""
    with tempfile.TemporaryDirectory(prefix="tprimat-golden-") as tmp:
        work = Path(tmp).resolve()
        return {**launches(work / "launch", data_source), **comparisons(work)}


def write_inputs() -> None:
    """Freeze the compared results (run once; the goldens then never depend on the helpers that made them)."""
    from tests.helpers.evaluate import make_result
    from tests.helpers.report_page import make_page_results

    with tempfile.TemporaryDirectory(prefix="tprimat-golden-inputs-") as tmp:
        page = make_page_results(Path(tmp) / "page" / "output")
        cpu = Path(tmp) / "cpu" / "output"
        for model, seed in (("llama", 1), ("qwen", 2)):
            make_result(cpu, "cpu", "tran", model, seed=seed, step_time=0.4, DP="1", GA="1", GPUS_PER_NODE="1",
                        MODEL_SIZE="tiny")
        unfair = Path(tmp) / "unfair" / "output"
        make_result(unfair, "nvd", "mega", seed=3, step_time=2.0)
        make_result(unfair, "amd", "mega", seed=4, step_time=2.1, LR="1e-3", loss_offset=0.5)
        shutil.rmtree(INPUTS, ignore_errors=True)
        for name, folder in (("page", page), ("cpu", cpu), ("unfair", unfair)):
            target = INPUTS / name
            target.mkdir(parents=True)
            for path in sorted(folder.glob("train_*.json")):
                shutil.copy(path, target / path.name)


def _moved(text: str) -> str:
    for old, new in MOVED.items():
        text = text.replace(old, new)
    return text


def check(found: dict[str, str]) -> list[str]:
    """The golden files that differ from ``found``, are missing, or are no longer produced."""
    known = {str(p.relative_to(OUT)) for p in OUT.rglob("*") if p.is_file()}
    problems = [f"{name}: no longer produced" for name in sorted(known - found.keys())]
    for name, text in sorted(found.items()):
        path = OUT / name
        if not path.exists():
            problems.append(f"{name}: new, not in the goldens")
        elif _moved(path.read_text(encoding="utf-8")) != text:
            problems.append(f"{name}: differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.capture", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="record the goldens in tests/golden/out/")
    mode.add_argument("--check", action="store_true", help="produce them again and list what differs")
    mode.add_argument("--inputs", action="store_true", help="freeze the compared results (once)")
    parser.add_argument("--data", type=Path, help="a sample data folder already built (default: build one here)")
    args = parser.parse_args(argv)
    if args.inputs:
        write_inputs()
        return 0
    found = produce(args.data)
    if args.write:
        shutil.rmtree(OUT, ignore_errors=True)
        for name, text in found.items():
            (OUT / name).parent.mkdir(parents=True, exist_ok=True)
            (OUT / name).write_text(text, encoding="utf-8")
        print(f"golden: {len(found)} files written to {OUT}")
        return 0
    problems = check(found)
    for line in problems:
        print(line)
    print(f"golden: {len(found)} produced, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
