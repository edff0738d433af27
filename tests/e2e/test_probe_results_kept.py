"""Issue 33, family 1: a finished result is never lost.

Real processes of shell/train.sh in a throwaway copy whose job scripts are small stand-ins (as
tests/e2e/test_untrusted_signals.py): what is checked is train.sh's and utils/files/run_owner.py's part. Those copies
have no comparison (tests/helpers/shell.py ``without_comparison``): it reads the results and writes only its own
files after the jobs, and no test here reads them.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.shell import script_env, without_comparison
from train.settings.platform_env import JOB_CACHE_DIRS
from utils.files.locks import hold, result_lock_path
from utils.files.run_owner import end
from utils.result.file import status_of
from utils.result.run_claim import claim, current_owner

JOB = {"PLATFORM": "cpu", "FRAMEWORK": "tran", "MODELS": "llama", "TP": "1", "PP": "1", "CP": "1", "DP": "1",
       "GA": "1", "GPUS_PER_NODE": "1", "MASTER_ADDR": "127.0.0.1"}


def _job(repo: Path, body: str) -> None:
    (repo / "train" / "train_cpu_tran_llama.sh").write_text(f"#!/usr/bin/env bash\n{body}\n")


def _finished_result(out: Path) -> Path:
    """A finished ok result's bytes under the cpu job's name (the helper's devices are GPUs)."""
    from tests.helpers.evaluate import make_result

    made = make_result(out.parent / "made", "nvd", "tran", model="llama")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "train_cpu_tran_llama.json"
    path.write_bytes(made.read_bytes())
    return path


def test_a_run_closes_only_what_its_start_claimed(tmp_path: Path) -> None:
    """The refused second run's ``end`` left the first run's claim alone (it wrote ``closed:<its id>``)."""
    path = _finished_result(tmp_path / "out")
    claim(path, "first-run")
    lines = end(path, "second-run", None)
    assert current_owner(path) == "first-run", "the first run still owns its result"
    assert any("never owned" in line for line in lines), lines


def test_a_refused_second_train_sh_leaves_the_first_runs_result(repo: Path, tmp_path: Path) -> None:
    """Two train.sh on one OUTPUT_DIR: the second is refused at its start, runs no job and closes nothing."""
    ran = tmp_path / "second-job-ran"
    _job(without_comparison(repo), f"touch {ran}")
    env = script_env(tmp_path, **JOB)
    result = _finished_result(Path(env["OUTPUT_DIR"]))
    before = result.read_bytes()
    claim(result, "first-run")
    with hold(result_lock_path(result), "the result", command="the first train.sh's launcher"):
        proc = subprocess.run(["bash", str(repo / "shell" / "train.sh")], env=env, cwd=repo, capture_output=True,
                              text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "not started" in text and not ran.exists(), text
    assert current_owner(result) == "first-run", text
    assert result.read_bytes() == before, "the first run's result is untouched"


def _launcher_standin(repo: Path, finished: Path, seconds: float) -> None:
    """The job does to the result what the launcher does: takes its lock, writes the finished result ``seconds`` on."""
    _job(repo, f"""cd "$(dirname "$0")/.." && exec {sys.executable} - <<'EOF'
import os, time
from pathlib import Path
from utils.files.locks import hold, result_lock_path
from utils.result.file import read_result, write_result
result = Path(os.environ["OUTPUT_DIR"]) / "train_cpu_tran_llama.json"
with hold(result_lock_path(result), "the result"):
    time.sleep({seconds})
    write_result(result, read_result(Path("{finished}")))
EOF""")


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5, 1, pytest.param(12, marks=pytest.mark.slow)])
def test_a_second_train_sh_never_takes_the_claim_of_a_live_run(repo: Path, tmp_path: Path, delay: float) -> None:
    """Issue 49: a second train.sh on the same OUTPUT_DIR ``delay`` s after the first; one runs, one is refused.

    The lock was held only while ``run_owner start`` wrote, and again by the launcher after its start-up: a second
    start in that gap took the claim, and the first run's finished result was dropped as "replaced". train.sh now
    holds the lock from the claim to the run's end. At 0.05 s either may win: whichever runs keeps its result.
    """
    _launcher_standin(without_comparison(repo), _finished_result(tmp_path / "finished"), seconds=delay + 4)
    env = script_env(tmp_path, **JOB)
    train = ["bash", str(repo / "shell" / "train.sh")]
    first = subprocess.Popen(train, env=env, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(delay)
    second = subprocess.run(train, env=env, cwd=repo, capture_output=True, text=True, timeout=300)
    texts = {first.communicate(timeout=300)[0]: first.returncode, second.stdout + second.stderr: second.returncode}
    assert sorted(texts.values()) == [0, 1], texts
    refused = next(text for text, code in texts.items() if code == 1)
    assert "not started" in refused and "the result is locked by pid" in refused, refused
    assert status_of(Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json") == "ok", texts


@contextlib.contextmanager
def _full_folder(path: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs at ``path`` filled to the last byte (skips where no tmpfs can be mounted)."""
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); the missing TMPDIR case stands for it")
    try:
        with contextlib.suppress(OSError), (path / "filler").open("wb") as filler:
            while True:
                filler.write(b"x" * 4096)
                filler.flush()
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("tmpdir", ["missing", pytest.param("full", marks=pytest.mark.slow)])  # a train.sh run each
def test_train_sh_needs_no_temporary_folder(repo: Path, tmp_path: Path, tmpdir: str) -> None:
    """TMPDIR missing or full: an ok job is still reported ok, exit 0 (mktemp's failure was unchecked)."""
    done = _finished_result(tmp_path / "finished")
    _job(without_comparison(repo), f'cp {done} "$OUTPUT_DIR/train_cpu_tran_llama.json"')
    with contextlib.ExitStack() as stack:
        folder = tmp_path / "no-such-folder" if tmpdir == "missing" else stack.enter_context(_full_folder(
            tmp_path / "full-tmp"))
        env = script_env(tmp_path, **JOB, TMPDIR=str(folder))
        proc = subprocess.run(["bash", str(repo / "shell" / "train.sh")], env=env, cwd=repo, capture_output=True,
                              text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert status_of(Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json") == "ok", text
    assert proc.returncode == 0, text
    assert "not run" not in text, text


# ---------------------------------------------------------------------------
# wrap and purge know every name tprimat's writers give


def _every_writers_name(out: Path) -> list[Path]:
    """What each writer would name in ``out``, asked of the writer's own name function."""
    from evaluate.analysis.comparison import Comparison
    from evaluate.extract import output_name
    from evaluate.gpu_check.cli import OUTPUT_STEM
    from evaluate.history.cli import TREND_PNG
    from tests.helpers.evaluate import make_result
    from utils.result.file import read_result, result_path
    from utils.result.names import frameworks_figure_name
    from utils.result.step_log import step_log_path
    from utils.spec.registry import platform_names

    made = read_result(make_result(out.parent / "made", "nvd", "tran"))
    names = [result_path(out, "nvd", "mega", "llama"), result_path(out, "amd", "prim", "qwen", profile="tuned"),
             result_path(out, "nvd", "tran", "llama", run_index=2, profile="tuned"),
             output_name(out, made, "runs/node-3/logs/pretrain.log", set()),
             step_log_path(result_path(out, "cpu", "tran", "llama", run_index=1))]
    names += [out / frameworks_figure_name(platform) for platform in platform_names()]
    names += [out / f"{OUTPUT_STEM}.md", out / f"{OUTPUT_STEM}.json", out / TREND_PNG]
    defaults = Comparison.__dataclass_fields__
    names += [out / defaults["figure_name"].default, out / defaults["parity_figure_name"].default]
    names += [out / name for name in ("compare.md", "system.json")]
    return names


def test_every_writers_name_is_known_to_wrap_and_purge(tmp_path: Path) -> None:
    from utils.files.generated import output_targets

    out = tmp_path / "out"
    names = _every_writers_name(out)
    for path in names:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    known = {t.path for t in output_targets(out)}
    assert [p.name for p in names if p not in known] == []


def test_wrap_packs_log_analysis_and_tuned_results(repo: Path, tmp_path: Path) -> None:
    from tests.helpers.shell import clean_env, run_script
    from utils.result.names import OUTPUT_MARKER

    out = tmp_path / "out"
    (out / ".tprimat").mkdir(parents=True)
    (out / OUTPUT_MARKER).write_text("tprimat's")
    wanted = ["train_nvd_mega_llama_from-node-3-pretrain.json", "train_amd_prim_llama_tuned.json",
              "compare_nvd_frameworks.png"]
    for name in wanted:
        (out / name).write_text("{}")
    proc = run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path, OUTPUT_DIR=str(out)))
    assert proc.returncode == 0, proc.stderr
    import zipfile

    with zipfile.ZipFile(repo / "output.zip") as zipped:
        packed = {Path(name).name for name in zipped.namelist()}
    assert set(wanted) <= packed, (packed, proc.stderr)


def test_wrap_packs_tprimat_files_under_umask_077(repo: Path, tmp_path: Path) -> None:
    from tests.helpers.shell import clean_env
    from utils.result.names import OUTPUT_MARKER

    out = tmp_path / "out"
    (out / ".tprimat").mkdir(parents=True)
    (out / OUTPUT_MARKER).write_text("tprimat's")
    (out / "train_cpu_tran_llama.json").write_text("{}")
    (out / "train_cpu_tran_llama.json").chmod(0o600)  # as written under umask 077
    proc = subprocess.run(["bash", "-c", 'umask 077 && exec bash shell/wrap.sh'], cwd=repo, capture_output=True,
                          text=True, timeout=120, env=clean_env(tmp_path, OUTPUT_DIR=str(out)))
    assert proc.returncode == 0 and (repo / "output.zip").is_file(), proc.stderr
    assert "train first" not in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# a job leaves nothing behind outside OUTPUT_DIR and DATA_DIR


@pytest.mark.slow  # one real tiny job (about 30 s on an idle machine)
def test_a_real_job_leaves_its_temporary_folder_empty(tiny_env, tmp_path: Path) -> None:
    """A real cpu tran job with TMPDIR an empty folder and no cache variable set leaves that folder empty.

    torchrun's ``torchelastic_<random>/`` went there for good, and torch's ``torchinductor_<user>/`` (made by
    importing ``torch._inductor``); the launcher now puts the first in the job's scratch folder and the caches in
    ``<DATA_DIR>/.tprimat/cache`` (train/settings/platform_env.py ``cache_env``), where the next job finds them.
    """
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = tiny_env(MODELS="llama", TRAIN_ITERS="2", WARMUP_STEPS="1", TMPDIR=str(temporary))
    for name in JOB_CACHE_DIRS:  # tests/conftest.py places them in the checkout's .cache: a user's job does not
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                           "--model", "llama"], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert status_of(Path(env["OUTPUT_DIR"]) / "train_cpu_tran_llama.json") == "ok", proc.stdout + proc.stderr
    assert sorted(p.name for p in temporary.iterdir()) == [], "the job left these in TMPDIR"
    assert (Path(env["DATA_DIR"]) / ".tprimat" / "cache" / "torchinductor").is_dir(), "the cache moved, not vanished"
