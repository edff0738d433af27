"""An encode killed mid-way never leaves a .bin without its .idx and manifest (a real process, a real signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data import encode
from tests.helpers.paths import REPO

PREFIX = "sample-llama_text_document"


def _grow_corpus(data_dir: Path, copies: int = 400) -> bytes:
    """The sample corpus many times over: long enough (about 10 s of encoding on an idle 2-core machine, where
    40 copies took 1 s) that the encode is caught while writing. Returns the original bytes."""
    clean = data_dir / "sample" / "clean.jsonl"
    original = clean.read_bytes()
    clean.write_bytes(original * copies)
    return original


def _start_encode(data_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "data.encode", "--force", "--no-progress", "--model", "llama",
                             "--workers", "1"], cwd=REPO, env={**os.environ, "DATA_DIR": str(data_dir)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_partial_bin(data_dir: Path, process: subprocess.Popen[bytes], timeout: float = 300) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        partial = [path for path in data_dir.glob(f".{PREFIX}.tmp-*.bin") if path.stat().st_size > 0]
        if partial:
            return True
        time.sleep(0.02)
    return False


def _published(data_dir: Path) -> dict[str, bool]:
    base = data_dir / PREFIX
    return {suffix: Path(f"{base}{suffix}").exists() for suffix in (".bin", ".idx", ".manifest.json")}


def _finished_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A prefix and the temporary .bin/.idx an encode has finished, ready to publish."""
    tmp_bin, tmp_idx = tmp_path / ".x.bin", tmp_path / ".x.idx"
    tmp_bin.write_bytes(b"\x01\x00")
    tmp_idx.write_bytes(b"idx")
    return tmp_path / "x_text_document", tmp_bin, tmp_idx


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_mid_encode_leaves_all_three_or_none(data_copy: Path, signum: int) -> None:
    original = _grow_corpus(data_copy)
    process = _start_encode(data_copy)
    try:
        caught_mid_way = _wait_for_partial_bin(data_copy, process)
        process.send_signal(signum)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert caught_mid_way, "the encode ended before it was caught writing"
    published = _published(data_copy)
    assert set(published.values()) == {False}, published  # the old pair was removed before the redo
    if signum != signal.SIGKILL:
        assert process.returncode == 128 + signum
        assert f"interrupted by {signal.Signals(signum).name}; no partial output was kept" in err.decode()
        assert not list(data_copy.glob(f".{PREFIX}.tmp-*")), "a handled signal leaves no temporary file"
    else:  # the next run clears what a SIGKILL left behind
        # over the original corpus: what is cleared and published does not depend on its size, and
        # encoding the 400 copies in-process cost ~27 s of CPU for nothing the assertions look at
        (data_copy / "sample" / "clean.jsonl").write_bytes(original)
        assert encode.main(["--model", "llama", "--no-progress"]) == 0
        assert set(_published(data_copy).values()) == {True}
        assert not list(data_copy.glob(f".{PREFIX}.tmp-*"))


def test_a_signal_while_publishing_waits_for_the_manifest(tmp_path: Path) -> None:
    """SIGTERM between the renames and the manifest is held until all three exist."""
    prefix, tmp_bin, tmp_idx = _finished_pair(tmp_path)
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    try:
        def manifest() -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives here, mid-publish (at whichever thread takes it)
            assert received == []  # ... and waits
            Path(f"{prefix}.manifest.json").write_text("{}")

        encode.publish(prefix, tmp_bin, tmp_idx, manifest)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == [signal.SIGTERM]
    assert all(Path(f"{prefix}{suffix}").exists() for suffix in (".bin", ".idx", ".manifest.json"))


def test_a_failed_manifest_unpublishes_the_pair(tmp_path: Path) -> None:
    prefix, tmp_bin, tmp_idx = _finished_pair(tmp_path)

    def manifest() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        encode.publish(prefix, tmp_bin, tmp_idx, manifest)
    assert not list(tmp_path.glob("x_text_document*"))


def test_a_signal_taken_by_another_thread_still_waits_for_the_manifest(tmp_path: Path) -> None:
    """The encode runs tokenizer threads: a SIGTERM delivered to one of them is held all the same."""
    import threading

    prefix, tmp_bin, tmp_idx = _finished_pair(tmp_path)
    received: list[int] = []
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=True)
    worker.start()
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    try:
        def manifest() -> None:
            assert worker.ident is not None
            signal.pthread_kill(worker.ident, signal.SIGTERM)  # delivered to the other thread, mid-publish
            time.sleep(0.05)  # the main thread passes many points where Python would run a pending handler
            assert received == []
            Path(f"{prefix}.manifest.json").write_text("{}")

        encode.publish(prefix, tmp_bin, tmp_idx, manifest)
    finally:
        signal.signal(signal.SIGTERM, previous)
        release.set()
        worker.join()
    assert received == [signal.SIGTERM]
    assert all(Path(f"{prefix}{suffix}").exists() for suffix in (".bin", ".idx", ".manifest.json"))
