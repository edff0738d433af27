"""Bad input to log analysis: a clear one-line message, a non-zero exit, bounded memory, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.fixtures.logs.generate_foreign import LLAMA, megatron_line
from tests.helpers.megatron import FIXTURES
from train.logs.scan import MAX_LINE_BYTES, scan_file
from utils.config.model import REPO_ROOT

FOREIGN = FIXTURES / "foreign"


def extract(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    return subprocess.run([sys.executable, "-m", "evaluate.extract", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def megatron_log(iterations: int, total: int | None = None) -> str:
    return "".join(megatron_line(i, total or iterations, LLAMA, seq=2048, gbs=64, world=8, peak=1e-4, warm=2) + "\n"
                   for i in range(1, iterations + 1))


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (bytes(range(256)) * 64, "binary file"),
    ("\ufffd".join("x" * 50 for _ in range(200)).encode("utf-16-le"), "binary file"),
    (b"hello\nthis is a readme, not a training log\n", "no Megatron-LM, Primus or NeMo iteration lines"),
])
def test_unusable_file_is_one_line_exit_2_and_nothing_written(tmp_path: Path, content: bytes, message: str) -> None:
    log = tmp_path / "input.log"
    log.write_bytes(content)
    output = tmp_path / "out" / "result.json"
    proc = extract(str(log), "--output", str(output))
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not output.exists() and not (tmp_path / "out").exists()


def test_missing_path_and_folder_without_output_dir(tmp_path: Path) -> None:
    assert extract(str(tmp_path / "absent.log")).returncode == 2
    proc = extract(str(tmp_path))
    assert proc.returncode == 2 and "pass --output-dir" in proc.stderr


def test_self_contradicting_log_is_refused_with_both_values(tmp_path: Path) -> None:
    output = tmp_path / "result.json"
    proc = extract(str(FOREIGN / "megatron_contradiction.log"), "--platform", "nvd", "--output", str(output))
    assert proc.returncode == 2 and not output.exists()
    assert "GBS: 128 in the arguments block, 64 in the iteration lines" in proc.stderr


def test_iteration_numbers_that_are_not_one_run_are_refused(tmp_path: Path) -> None:
    log = tmp_path / "jumps.log"
    log.write_text(megatron_log(3, 9_000_000) + megatron_line(8_000_000, 9_000_000, LLAMA, seq=2048, gbs=64,
                                                              world=8, peak=1e-4, warm=2) + "\n")
    proc = extract(str(log), "--model", "llama", "--platform", "amd")
    assert proc.returncode == 2 and "not one run's numbering" in proc.stderr


def test_a_10_mb_line_is_cut_and_the_rest_of_the_log_still_read(tmp_path: Path) -> None:
    log = tmp_path / "long_line.log"
    with open(log, "w") as handle:
        handle.write(megatron_log(5, 10))
        handle.write("x" * (10 * 1024 * 1024) + "\n")
        handle.write(megatron_log(10)[len(megatron_log(5, 10)):])
    tracemalloc.start()
    try:
        scan = scan_file(log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024 * 1024  # the 10 MiB line never sits in memory: it is read in 64 KiB pieces
    assert [r.iteration for r in scan.iterations] == list(range(1, 11))
    assert any(f"longer than {MAX_LINE_BYTES // 1024} KiB cut there (first: line 6)" in w for w in scan.warnings)
    only_long = tmp_path / "one_line.log"
    only_long.write_text("y" * (10 * 1024 * 1024))
    proc = extract(str(only_long))
    assert proc.returncode == 2 and "no Megatron-LM, Primus or NeMo iteration lines" in proc.stderr


def test_a_million_line_log_is_streamed(tmp_path: Path) -> None:
    """1,000,000 lines (70 MB): the scan's memory grows with the iterations it keeps, not with the file."""
    log = tmp_path / "million.log"
    with open(log, "w") as handle:  # a block of 999 other lines then an iteration line, written a block at a time
        for block in range(1000):
            first = block * 1000 + 1
            handle.write("".join([f"loading shard {i:07d} of the dataset index, {i % 97:02d} files open, waiting\n"
                                  for i in range(first, first + 999)]))
            handle.write(megatron_line(block + 1, 1000, LLAMA, seq=2048, gbs=64, world=8, peak=1e-4, warm=2) + "\n")
    probe = ("import resource, sys; from pathlib import Path; from train.logs.scan import scan_file; "
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; scan = scan_file(Path(sys.argv[1])); "
             "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
             "print(len(scan.iterations), scan.line_count, (after - before) // 1024)")
    proc = subprocess.run([sys.executable, "-c", probe, str(log)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    iterations, lines, grown_mib = map(int, proc.stdout.split())
    assert (iterations, lines) == (1000, 1_000_000)
    assert log.stat().st_size > 60 * 1024 * 1024 and grown_mib < 20


def test_truncated_event_file_is_incomplete_with_the_reason(tmp_path: Path) -> None:
    from tests.helpers.events import write_megatron_events

    events = write_megatron_events(tmp_path / "tb", steps=20)
    events.write_bytes(events.read_bytes()[:-30])  # cut inside the last record
    output = tmp_path / "result.json"
    proc = extract(str(events), "--platform", "nvd", "--output", str(output))
    assert proc.returncode == 1, proc.stderr
    result = json.loads(output.read_text())
    assert result["status"] == "incomplete" and "is truncated or corrupt after" in result["error"]
    garbage = tmp_path / "events.out.tfevents.1.host.1.0"
    garbage.write_bytes(b"not a record at all, just text that happens to have this name")
    proc = extract(str(garbage), "--platform", "nvd", "--output", str(tmp_path / "g.json"))
    assert proc.returncode == 2 and "failed header crc32 check" in proc.stderr
    assert not (tmp_path / "g.json").exists()


def test_folder_with_nothing_recognisable(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "README.md").write_text("# notes\n")
    (folder / "sub" / "weights.bin").write_bytes(bytes(4096))
    (folder / "empty.log").write_bytes(b"")
    proc = extract(str(folder), "--output-dir", str(tmp_path / "out"))
    assert proc.returncode == 2 and "nothing recognisable" in proc.stderr
    assert "binary file" in proc.stdout and "empty file" in proc.stdout and "README.md" in proc.stdout
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unwritable_output_leaves_nothing_behind(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = extract(str(FOREIGN / "megatron_core012_gbs128_llama.log"), "--output", str(blocker / "result.json"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
