"""How a torchrun worker ends (train/tran/worker.py ``exit_worker``): its output flushed, no interpreter finalization.

Why it matters: a gloo worker thread still dropping the last collective's tensors while the interpreter finalizes
aborts the rank with "terminate called without an active exception" after the job succeeded (core dump in
docs/PERFORMANCE.md, "The teardown abort"); the race itself is a matter of thread scheduling and cannot be forced
here, so these tests hold the two things the fix rests on: nothing the job prints or logs is lost, and the real
worker entries never reach finalization (an ``atexit`` hook, which finalization would run, never runs).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.proc import PYTHON
from tests.helpers.workload import tiny_environ

FINALIZED = "finalized: atexit ran"


def _without_unbuffered(env: dict[str, str]) -> dict[str, str]:
    """Block-buffered stdout, as a worker's pipe to the launcher is without PYTHONUNBUFFERED."""
    return {key: value for key, value in env.items() if key != "PYTHONUNBUFFERED"}


def test_exit_worker_keeps_output_and_skips_finalization(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    script = (
        "import atexit, logging, sys\n"
        "from train.tran.worker import exit_worker\n"
        f"atexit.register(print, {FINALIZED!r})\n"
        f"logging.basicConfig(filename={str(log)!r}, level=logging.INFO)\n"
        "logging.info('logged before the exit')\n"
        "sys.stdout.write('printed, no newline')\n"
        "sys.stderr.write('to stderr')\n"
        "exit_worker(3)\n"
        "print('after exit_worker')\n"
    )
    env = _without_unbuffered(tiny_environ(tmp_path, tmp_path / "out"))
    proc = subprocess.run([PYTHON, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout == "printed, no newline"  # flushed, and neither the atexit hook nor later code ran
    assert proc.stderr.endswith("to stderr")
    assert log.read_text(encoding="utf-8").strip() == "INFO:root:logged before the exit"


@pytest.fixture
def atexit_probe(tmp_path: Path) -> dict[str, str]:
    """The tiny environment plus a ``sitecustomize`` that registers an atexit hook in every Python started."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import atexit\natexit.register(print, {FINALIZED!r}, flush=True)\n",
                                           encoding="utf-8")
    # DP=2 without torchrun: the worker returns 2 ("torchrun started 1 process(es) ...") right after its set-up
    env = tiny_environ(tmp_path / "data", tmp_path / "out", DP="2", GPUS_PER_NODE="2")
    env["PYTHONPATH"] = str(site)
    return _without_unbuffered(env)


@pytest.mark.parametrize("framework", ["tran", "deep"])
def test_the_worker_entries_end_through_exit_worker(atexit_probe: dict[str, str], tmp_path: Path,
                                                    framework: str) -> None:
    module = f"train.{framework}.worker"
    extra = ["--deepspeed-config", str(tmp_path / "ds.json")] if framework == "deep" else []
    # the probe works: --help ends in argparse's SystemExit, before exit_worker, so finalization runs the hook
    helped = subprocess.run([PYTHON, "-m", module, "--help"], env=atexit_probe, cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert helped.returncode == 0 and FINALIZED in helped.stdout
    proc = subprocess.run([PYTHON, "-m", module, "--model", "llama", "--result", str(tmp_path / "r.json"), *extra],
                          env=atexit_probe, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"train_{framework}: error: torchrun started 1 process(es)" in proc.stderr
    assert FINALIZED not in proc.stdout
