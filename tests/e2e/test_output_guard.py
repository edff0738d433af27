"""No run without a result: OUTPUT_DIR checked first, a full disk never truncates a result or crashes after "ok".

A full disk is a real small tmpfs where this machine lets root mount one, and a stand-in that raises ENOSPC
at the write everywhere (so the fallbacks are tested on any machine).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import utils.files.disk
import utils.files.result_file
from tests.helpers.paths import REPO
from tests.helpers.workload import tiny_environ
from tests.unit.train.launch.test_launch import context, ok_result, plugin
from train.launch.launcher import launch
from utils.files.disk import OutputDirError, check_writable_dir
from utils.io.output_path import LOCK_DIR
from utils.result.file import read_result


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str, read_only: bool = False, inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs of ``size`` (and ``inodes``) at ``path``; skips the test where it cannot be mounted (not root)."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "") + (f",nr_inodes={inodes}" if inodes else "")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); the ENOSPC stand-in tests cover it")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


# ---------------------------------------------------------------------------
# before any training


def test_not_a_directory_unwritable_and_full_are_one_line(tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(OutputDirError, match=r"^OUTPUT_DIR=.*a-file is not a directory"):
        check_writable_dir(file)
    with pytest.raises(OutputDirError, match="cannot be created"):
        check_writable_dir(file / "sub")
    with pytest.raises(OutputDirError, match=r"has only .* free; a run needs at least 1\.0 TiB"):
        check_writable_dir(tmp_path / "new", min_free_bytes=2**40)
    assert (tmp_path / "new").is_dir() and not list((tmp_path / "new").iterdir()), "the probe is removed"


def test_read_only_and_tiny_filesystems(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "ro", "1m", read_only=True) as ro, \
            pytest.raises(OutputDirError, match="is not writable: Read-only file system"):
        check_writable_dir(ro)
    with mounted_tmpfs(tmp_path / "tiny", "64k") as tiny, pytest.raises(OutputDirError, match=r"has only 64\.0 KiB"):
        check_writable_dir(tiny)


@pytest.mark.parametrize("how", ["statvfs", "tmpfs"])
def test_a_folder_with_few_free_inodes_is_refused_naming_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              how: str) -> None:
    """Issue 49: 4 free inodes passed the check (bytes only) and the job failed with ENOSPC; now one line."""
    if how == "statvfs":  # a filesystem that reports 4 free inodes of a million, with bytes to spare
        real = os.statvfs(tmp_path)
        fields = [*real[:5], 10**6, 4, 4, *real[8:]]  # f_files, f_ffree, f_favail
        monkeypatch.setattr(utils.files.disk.os, "statvfs", lambda _path: os.statvfs_result(fields))
        folder = contextlib.nullcontext(tmp_path / "out")
    else:
        folder = mounted_tmpfs(tmp_path / "out", "128m", inodes=8)
    with folder as out, pytest.raises(OutputDirError, match=r"has only [0-9] free inodes .* at least 1024"):
        check_writable_dir(out)


def test_a_check_never_removes_the_bookkeeping_folder_another_check_probes(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49 (two Slurm nodes, one OUTPUT_DIR, 1 run in 3): node A made ``.tprimat``, B probed in it, A removed it.

    The interleaving is forced: A pauses in its probe of the bookkeeping folder until B is in its own, and B goes on
    once A's check has returned. Each check returns or raises within the test's bounds (no deadlock either way).
    """
    out = tmp_path / "shared"
    real, b_inside, a_done = utils.files.disk._probe_write, threading.Event(), threading.Event()

    def probe(folder: Path) -> None:
        if folder.name == LOCK_DIR:
            (b_inside.set() or a_done.wait(10)) if threading.current_thread().name == "B" else b_inside.wait(10)
        real(folder)

    monkeypatch.setattr(utils.files.disk, "_probe_write", probe)
    failures: list[str] = []

    def check(name: str) -> None:
        try:
            check_writable_dir(out)
        except OutputDirError as exc:
            failures.append(f"{name}: {exc}")
        finally:
            a_done.set() if name == "A" else None

    threads = [threading.Thread(target=check, args=(name,), name=name) for name in "AB"]
    threads[0].start()
    while not out.exists() and threads[0].is_alive():
        time.sleep(0.01)
    threads[1].start()
    for thread in threads:
        thread.join(30)
    assert failures == []


@pytest.mark.parametrize("kind", ["file", "tiny"])
def test_train_sh_and_the_launcher_stop_before_any_job(repo: Path, tmp_path: Path, kind: str) -> None:
    from tests.helpers.shell import clean_env, run_script

    if kind == "file":
        out = tmp_path / "out"
        out.write_text("not a directory")
        context_manager: contextlib.AbstractContextManager = contextlib.nullcontext(out)
    else:
        context_manager = mounted_tmpfs(tmp_path / "out", "64k")
    marker = tmp_path / "a-job-ran"
    for script in (repo / "train").glob("train_*_*_*.sh"):
        script.write_text(f"#!/usr/bin/env bash\ntouch {marker}\n")
    with context_manager as out:
        env = clean_env(tmp_path, PLATFORM="cpu", FRAMEWORK="tran", OUTPUT_DIR=str(out))
        shell = run_script(repo, "shell/train.sh", env=env)
        launcher = subprocess.run([sys.executable, "-m", "train.launch", "--platform", "cpu", "--framework", "tran",
                                   "--model", "llama"], env=tiny_environ(tmp_path / "d", out), cwd=REPO,
                                  capture_output=True, text=True, timeout=120)
    for proc in (shell, launcher):
        assert proc.returncode == 1, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and f"OUTPUT_DIR={out}" in lines[0], proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
    assert not marker.exists(), "train.sh started no job"
    assert "job(s)" not in shell.stdout


# ---------------------------------------------------------------------------
# while the result is written


@pytest.fixture
def small_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A floor a small tmpfs can meet: the reserve is what these tests are about."""
    monkeypatch.setattr(utils.files.disk, "MIN_FREE_BYTES", 16 * 1024)


def test_a_job_that_fills_the_disk_still_gets_its_result(tmp_path: Path, small_floor: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The room set aside before the job is what the final result is written into."""
    with mounted_tmpfs(tmp_path / "out", "512k") as out:
        ctx = context(out, TRAIN_ITERS="20", WARMUP_STEPS="2")
        job = (f"import errno\ntry:\n    with open({str(out / 'filler')!r}, 'wb', buffering=0) as f:\n"
               "        while True: f.write(bytes(4096))\nexcept OSError as e:\n"
               "    print('the job filled the disk' if e.errno == errno.ENOSPC else e)\n"
               # more output than the log's last partly used block holds (the launch header is in it)
               "    print('x' * 16384)\nraise SystemExit(3)")
        code = launch(ctx, plugin(job))
        assert code == 1
        captured = capsys.readouterr()
        assert "the job filled the disk" in captured.out
        assert "cannot write the log" in captured.err, "the log stopped, the launcher went on"
        result = read_result(ctx.result_path)
        assert result.status == "failed" and "exit code 3" in result.error
        assert not list((out / ".tprimat").glob("*.reserve")), "the reserve was released"


def test_no_room_for_the_result_is_one_line_before_the_job(tmp_path: Path, small_floor: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with mounted_tmpfs(tmp_path / "out", "128k") as out:
        (out / "train_cpu_tran_llama.json").write_text('{"an": "older result"}')
        ctx = context(out, TRAIN_ITERS="1000000", WARMUP_STEPS="2")  # a result of 1e6 steps needs ~256 MB
        ran = out / "ran"
        assert launch(ctx, plugin(f"open({str(ran)!r}, 'w')")) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "has no room for the result of this job" in err[0]
        assert not ran.exists()
        assert (out / "train_cpu_tran_llama.json").read_text() == '{"an": "older result"}', "left as it was"


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_enospc_at_the_final_write_leaves_a_failed_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Stand-in: the full result cannot be written, the compact one can."""
    ctx = context(tmp_path)
    real = utils.files.result_file.write_result
    calls: list[str] = []

    def write(path: Path, result) -> Path:
        calls.append(result.status)
        if result.status == "ok" or result.step_times:
            _enospc()
        return real(path, result)

    monkeypatch.setattr(utils.files.result_file, "write_result", write)
    code = launch(ctx, plugin("pass", collect=ok_result))
    assert code == 1
    result = read_result(ctx.result_path)
    assert result.status == "failed" and "No space left on device" in result.error
    assert calls == ["incomplete", "ok", "failed"]
    assert "wrote a failed result without the per-step arrays" in capsys.readouterr().err


def test_enospc_for_every_final_write_keeps_the_placeholder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    ctx = context(tmp_path)
    real = utils.files.result_file.write_result
    written = []

    def write(path: Path, result) -> Path:
        if written:
            _enospc()
        written.append(result.status)
        return real(path, result)

    monkeypatch.setattr(utils.files.result_file, "write_result", write)
    assert launch(ctx, plugin("pass", collect=ok_result)) == 1  # no crash after "ok"
    result = read_result(ctx.result_path)
    assert result.status == "incomplete" and "has not recorded its end" in result.error
    err = capsys.readouterr().err
    assert "the placeholder (incomplete) stays" in err and "Traceback" not in err
    assert json.loads(ctx.result_path.read_text())["status"] == "incomplete", "whole JSON, never truncated"


def test_the_placeholder_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ctx = context(tmp_path)
    ctx.result_path.write_text('{"status": "ok", "older": true}')
    monkeypatch.setattr(utils.files.result_file, "write_result", _enospc)
    ran = tmp_path / "ran"
    assert launch(ctx, plugin(f"open({str(ran)!r}, 'w')")) == 1
    assert not ran.exists() and not ctx.result_path.exists(), "no job, and no older result passing for this one"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write the result" in err[0]
