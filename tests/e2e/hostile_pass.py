"""Issue 33's own hostile pass: cases beyond the probe's, each run as a real process, each outcome measured.

``python -m tests.e2e.hostile_pass [--out FILE]`` runs every case in a throwaway folder and prints one row a
case: its id, what it tries, the exit status, whether it finished within the bound, and the verdict: ``pass``
when the entry point answered as the house rules ask (no traceback, nothing raw a terminal acts on, one bounded
stderr line or more, no hang, a non-zero exit for bad input or 128 + n for a signal), ``FAIL`` with why
otherwise. A signal sent before the entry point's first tprimat import had installed the answer (read from
``/proc/<pid>/status`` as it is sent) may end the bare interpreter by the signal's default action: with nothing
printed that is a pass too (POSIX: a shell reports 128 + n; docs/RELIABILITY.md says why).
The table in docs/RELIABILITY.md is this script's output, not written by hand.
Not a test module: a pass that finds failures must still finish and report them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.evaluate import make_result
from tests.helpers.paths import FIXTURES, REPO
from tests.helpers.shell import clean_env

BOUND_S = 90
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
ESC = "\x1b[2J\x1b]0;t\x07\n# FORGED\r"


@dataclass
class Case:
    id: str
    what: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    send: int | None = None  # a signal, sent after ``delay`` seconds
    delay: float = 0.0
    expect: str = "error"  # error: exit != 0 | ok: exit 0 | any: no traceback only | signal: 128 + send


@dataclass
class Outcome:
    case: Case
    code: int | None
    seconds: float
    verdict: str


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def _cases(root: Path) -> list[Case]:
    out = root / "out"
    good = make_result(out, "nvd", "tran")
    results = out
    fifo = root / "train_fifo_x.json"
    os.mkfifo(root / "fifo")
    bad = root / "bad"
    bad.mkdir()
    os.mkfifo(bad / "train_nvd_tran_llama.json")
    dirs = root / "dirs"
    (dirs / "train_nvd_tran_llama.json").mkdir(parents=True)
    loop = root / "loop"
    loop.mkdir()
    (loop / "train_nvd_tran_qwen.json").symlink_to(loop / "train_nvd_tran_qwen.json")
    text = good.read_text()
    data = json.loads(text)

    def variant(name: str, content: bytes | str) -> Path:
        folder = root / name
        folder.mkdir()
        path = folder / "train_nvd_tran_llama.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return folder

    bom = variant("bom", b"\xef\xbb\xbf" + text.encode())
    utf16 = variant("utf16", text.encode("utf-16"))
    dup = variant("dupkey", text.replace('"status":', '"status": "failed", "status":', 1))
    big_number = variant("bignum", re.sub(r'"SEED": ?\d+', '"SEED": 1e400', text, count=1))
    hostile_error = dict(data, status="failed", error=ESC * 3)
    hostile = variant("hostile", json.dumps(hostile_error))
    hostile_file = hostile / "train_nvd_tran_llama.json"
    trunc = variant("trunc", text[: len(text) // 2])
    empty_log = root / "empty.log"
    empty_log.write_text("")
    binary_log = root / "binary.log"
    binary_log.write_bytes(b"\0" * 4096)
    long_log = root / "long.log"
    long_log.write_text("x" * 10_000_000 + "\n")
    hostile_log = root / ("run" + "\x1b[31m" + ".log")
    shutil.copy(FIXTURES / "logs" / "megatron_core012_llama.log", hostile_log)
    prescreen_nan = root / "prescreen-nan.json"
    prescreen_nan.write_text('{"platform": "nvd", "device_name": NaN}')
    prescreen_deep = root / "prescreen-deep.json"
    prescreen_deep.write_text("[" * 100 + "]" * 100)
    codes = root / "codes.tsv"
    codes.write_text(f"{out}/train_nvd_tran_llama{ESC}.json\t0\n")
    cfg = ["utils.config.load", "--before-launch", "cpu"]
    check = ["evaluate.gpu_check", "--results-dir", str(results), "--platform", "nvd", "--out-dir", str(root / "gc"),
             "--frameworks", "tran", "--prescreen"]
    extract = ["evaluate.extract", "--platform", "nvd", "--model", "llama", "--output", str(root / "x.json")]
    slow = root / "slow"  # enough results that the command is still working when the signal comes
    for seed in range(6):
        make_result(slow, "nvd", "tran", run_index=seed + 1, seed=seed)
    return [
        # readers
        Case("R01", "validate: a FIFO named train_*.json", _python("evaluate.validate", str(bad))),
        Case("R02", "compare: a directory named train_*.json", _python("evaluate.compare", "--results-dir", str(dirs))),
        Case("R03", "validate: a symlink loop named train_*.json", _python("evaluate.validate", str(loop))),
        Case("R04", "extract: a FIFO as the log", _python(*extract[:-2], str(root / "fifo"))),
        Case("R05", "extract: /dev/zero as the log", _python(*extract[:-2], "/dev/zero")),
        Case("R06", "extract: an empty log", _python(*extract[:-2], str(empty_log))),
        Case("R07", "extract: a binary file as the log", _python(*extract[:-2], str(binary_log))),
        Case("R08", "extract: one 10 MB line", _python(*extract[:-2], str(long_log))),
        Case("R09", "extract: a folder holding a symlink loop", _python("evaluate.extract", str(loop), "--output-dir",
                                                                        str(root / "xo"))),
        Case("R10", "result status: a FIFO", _python("utils.result.file", "status", str(fifo.parent / "fifo")),
             expect="any"),
        Case("R11", "validate: a UTF-8 BOM before the JSON", _python("evaluate.validate", str(bom)), expect="any"),
        Case("R12", "validate: a UTF-16 result", _python("evaluate.validate", str(utf16))),
        Case("R13", "validate: a duplicated key", _python("evaluate.validate", str(dup)), expect="any"),
        Case("R14", "validate: a number of 1e400", _python("evaluate.validate", str(big_number))),
        Case("R15", "validate: a truncated result", _python("evaluate.validate", str(trunc))),
        Case("R16", "compare: --results-dir is a file", _python("evaluate.compare", "--results-dir", str(good))),
        Case("R17", "gpu_check: the prescreen is a directory", _python(*check, str(root)), expect="any"),
        Case("R18", "gpu_check: a NaN literal in the prescreen", _python(*check, str(prescreen_nan)), expect="any"),
        Case("R19", "gpu_check: a prescreen nested 100 deep", _python(*check, str(prescreen_deep)), expect="any"),
        Case("R20", "gpu_check: the prescreen is a FIFO", _python(*check, str(root / "fifo")), expect="any"),
        Case("R21", "history add: a FIFO", _python("evaluate.history", "add", str(root / "fifo")),
             env={"HISTORY_DB": str(root / "h.sqlite")}),
        Case("R22", "history add: a truncated result", _python("evaluate.history", "add", str(trunc)),
             env={"HISTORY_DB": str(root / "h.sqlite")}),
        Case("R23", "gate: a candidate that is a FIFO", _python("evaluate.gate", "--candidate", str(root / "fifo"),
                                                               "--db", str(root / "h2.sqlite"))),
        Case("R24", "jobs --summary: a FIFO codes file", _python("train.launch.jobs", "--platform", "cpu", "--summary",
                                                              "/dev/null/none")),
        Case("R25", "purge: OUTPUT_DIR=/", ["bash", str(REPO / "shell" / "purge.sh"), "--yes"],
             env={"OUTPUT_DIR": "/"}),
        # renderers
        Case("T01", "validate: a failed result whose error holds escapes and a heading",
             _python("evaluate.validate", str(hostile))),
        Case("T02", "compare: the same", _python("evaluate.compare", "--results-dir", str(hostile)), expect="any"),
        Case("T03", "result status: the same", _python("utils.result.file", "status", str(hostile_file)), expect="any"),
        Case("T04", "result check: the same", _python("utils.result.file", "check", str(hostile_file)), expect="any"),
        Case("T05", "extract: a log file named with an escape", _python(*extract[:-2], str(hostile_log)), expect="any"),
        Case("T06", "jobs --summary: a result path with escapes", _python("train.launch.jobs", "--platform", "cpu",
                                                                        "--summary", str(codes)), expect="any"),
        Case("T07", "history add then list: a hostile result", ["bash", "-c",
             f"{sys.executable} -m evaluate.history add {hostile} && {sys.executable} -m evaluate.history list"],
             env={"HISTORY_DB": str(root / "h3.sqlite")}, expect="any"),
        Case("T08", "validate --json: the hostile result", _python("evaluate.validate", "--json", str(hostile)),
             expect="any"),
        Case("T09", "extract folder table: a hostile log name", _python("evaluate.extract", str(root),
                                                                       "--output-dir", str(root / "xf")), expect="any"),
        Case("T10", "gpu_check: a failed framework with a hostile error", _python(*check[:3], str(hostile),
             *check[3:-1]), expect="any"),
        # signals
        Case("S01", "SIGTERM to evaluate.validate at start-up", _python("evaluate.validate", str(slow)),
             send=signal.SIGTERM, delay=0.5, expect="signal"),
        Case("S02", "SIGHUP to evaluate.extract at start-up", _python(*extract[:-2], str(long_log)),
             send=signal.SIGHUP, delay=0.5, expect="signal"),
        Case("S03", "SIGINT to evaluate.history list", _python("evaluate.history", "list"),
             env={"HISTORY_DB": str(root / "h4.sqlite")}, send=signal.SIGINT, delay=0.5, expect="signal"),
        Case("S04", "SIGINT to evaluate.gate", _python("evaluate.gate", "--candidate", str(good), "--db",
                                                      str(root / "h5.sqlite")), send=signal.SIGINT, delay=0.5,
             expect="signal"),
        Case("S05", "SIGINT to utils.files.wrap", _python("utils.files.wrap"), env={"OUTPUT_DIR": str(out)},
             send=signal.SIGINT, delay=0.5, expect="signal"),
        Case("S06", "SIGINT to utils.files.purge", _python("utils.files.purge", "--help"), send=signal.SIGINT,
             delay=0.3, expect="signal"),
        Case("S07", "SIGINT to train.launch.jobs", _python("train.launch.jobs", "--platform", "cpu"),
             send=signal.SIGINT, delay=0.3, expect="signal"),
        Case("S08", "SIGTERM to data.fetch at start-up", _python("data.fetch"), send=signal.SIGTERM, delay=0.3,
             expect="signal"),
        Case("S09", "SIGINT to evaluate.compare at start-up", _python("evaluate.compare", "--results-dir", str(slow)),
             send=signal.SIGINT, delay=0.3, expect="signal"),
        Case("S10", "SIGHUP to utils.config.load", _python("utils.config.load", "--json"), send=signal.SIGHUP,
             delay=0.2, expect="signal"),
        # configuration values
        Case("C01", "SL=0", _python(*cfg), env={"SL": "0"}),
        Case("C02", "SL=-1", _python(*cfg), env={"SL": "-1"}),
        Case("C03", "TRAIN_ITERS=1e9", _python(*cfg), env={"TRAIN_ITERS": "1e9"}),
        Case("C04", "MASTER_PORT=70000", _python(*cfg), env={"MASTER_PORT": "70000"}),
        Case("C05", "PLATFORM=NVD (upper case)", _python(*cfg), env={"PLATFORM": "NVD"}, expect="any"),
        Case("C06", "MODEL_LAYERS=0", _python(*cfg), env={"MODEL_LAYERS": "0"}),
        Case("C07", "PRECISION=fp64", _python(*cfg), env={"PRECISION": "fp64"}),
        Case("C08", "DATASET with an escape", _python(*cfg), env={"DATASET": "local:/tmp/a\x1b[2J"}),
        Case("C09", "SL=2147483648 on tiny", _python(*cfg), env={"SL": "2147483648", "MODEL_SIZE": "tiny"}),
        Case("C10", "MBS=0", _python(*cfg), env={"MBS": "0"}),
    ]


def _catches(pid: int, signum: int) -> bool | None:
    """Whether process ``pid`` has a handler for ``signum`` now (``SigCgt`` in /proc); None when unknown."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    mask = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), None)
    return None if mask is None else bool(int(mask, 16) & (1 << (signum - 1)))


def run_case(case: Case, root: Path) -> Outcome:
    env = clean_env(root, PLATFORM="cpu", MODEL_SIZE="tiny", OUTPUT_DIR=str(root / "cfg-out"),
                    DATA_DIR=str(root / "cfg-data"))
    env.update(case.env)
    start = time.monotonic()
    proc = subprocess.Popen(case.argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    answered_then = None
    if case.send is not None:
        time.sleep(case.delay)
        if proc.poll() is None:
            answered_then = _catches(proc.pid, case.send)
            proc.send_signal(case.send)
    try:
        out_b, err_b = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Outcome(case, None, time.monotonic() - start, f"FAIL: no answer within {BOUND_S} s (hang)")
    seconds = time.monotonic() - start
    out, err = out_b.decode("utf-8", "replace"), err_b.decode("utf-8", "replace")
    code = proc.returncode
    problems = []
    if "Traceback (most recent call last)" in err or "Traceback (most recent call last)" in out:
        last = [line for line in err.splitlines() if line.strip()][-1:] or ["?"]
        problems.append(f"traceback ({last[0][:80]})")
    if RAW.search(out.replace("\t", "")) or RAW.search(err.replace("\t", "")):
        problems.append("raw control characters in the output")
    if re.search(r"^\s*# FORGED", out + "\n" + err, re.MULTILINE):
        problems.append("a forged heading at a line start")
    if case.expect == "error" and code == 0:
        problems.append("exit 0 on bad input")
    if (case.expect == "signal" and case.send is not None and code == -case.send and answered_then is False
            and not out.strip() and not err.strip()):
        # Sent before the project's first import had installed its answer (utils/io/signals.py): the bare
        # interpreter ends by the signal's default action, as POSIX asks; nothing printed, a shell reports 128 + n.
        return Outcome(case, code, seconds, f"pass (killed by {signal.Signals(case.send).name} before any tprimat "
                                            f"code ran, nothing printed: a shell reports {128 + case.send})")
    if case.expect == "signal" and case.send is not None and code not in (128 + case.send, 0):
        problems.append(f"exit {code}, not {128 + case.send}")
    if case.expect == "signal" and code == 0:
        return Outcome(case, code, seconds, "n/a: finished before the signal")
    return Outcome(case, code, seconds, "FAIL: " + "; ".join(problems) if problems else "pass")


def run_pass(prog: str, doc: str, make_cases: Callable[[Path], list[Case]], argv: list[str] | None = None) -> int:
    """A hostile pass's command line: every case of ``make_cases`` in a throwaway folder, one table row a case."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    parser.add_argument("--only", help="run the cases whose id starts with this")
    args = parser.parse_args(argv)
    rows = ["| case | what | exit | seconds | verdict |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="tprimat-hostile-") as folder:
        root = Path(folder)
        cases = [c for c in make_cases(root) if not args.only or c.id.startswith(args.only)]
        for case in cases:
            outcome = run_case(case, root)
            row = (f"| {case.id} | {case.what} | {outcome.code} | {outcome.seconds:.1f} | "
                   f"{outcome.verdict.replace('|', '/')} |")
            rows.append(row)
            print(row, flush=True)
    if args.out:
        args.out.write_text("\n".join(rows) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_pass("tests.e2e.hostile_pass", __doc__ or "", _cases, argv)


if __name__ == "__main__":
    sys.exit(main())
