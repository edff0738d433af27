"""validate and compare on hostile inputs: broken figures, unusable files, bad prices, unwritable outputs.

Every case ends in a clear message that names the file (or the option) and a
defined exit status: a broken result is never counted as valid, a file that cannot
be read is never skipped silently, and compare's exit 1 always means "unfair".
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
from pathlib import Path

import pytest

import utils.io.json_input
from evaluate import compare
from evaluate.compare import main as compare_main
from evaluate.render import outputs
from evaluate.validate import main as validate_main
from tests.helpers.evaluate import make_result
from tests.helpers.proc import run_module

SUBPROCESS_ENV = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}


def run(capsys: pytest.CaptureFixture[str], main, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def two_good_results(out: Path) -> list[Path]:
    return [make_result(out, "amd", "prim", seed=1), make_result(out, "nvd", "nemo", seed=2)]


def broken_copy(good: Path, target: Path, edit) -> Path:
    """``target``: the JSON of ``good`` with ``edit`` applied to it (NaN and infinity written as JSON allows)."""
    data = json.loads(good.read_text())
    edit(data)
    target.write_text(json.dumps(data), encoding="utf-8")
    return target


BROKEN_FIGURES = {
    "nan-throughput": (lambda d: d["performance_metrics"].update(tokens_per_second=float("nan")),
                       "performance_metrics/tokens_per_second"),
    "negative-mean": (lambda d: d["performance_metrics"]["step_time_seconds"].update(mean=-1.0),
                      "performance_metrics/step_time_seconds/mean"),
    "infinite-energy": (lambda d: d["power_metrics"].update(energy_j=float("inf")), "power_metrics/energy_j"),
    "negative-step-time": (lambda d: d["step_times"].__setitem__(3, -0.5), "step_times/3"),
    "negative-memory": (lambda d: d["memory_metrics"].update(peak_allocated_gb=-62.0),
                        "memory_metrics/peak_allocated_gb"),
}


@pytest.fixture(scope="module")
def broken_figures_compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Path], int, str, str]:
    """Two good results and one broken copy per case of ``BROKEN_FIGURES``, compared once.

    The loader judges each file on its own, so one compare over all the broken copies says for each what a
    compare beside it alone said (each case used to draw the same figures of the same two good results).
    Returns the broken files by case, compare's exit status, its stderr and the report.
    """
    out = tmp_path_factory.mktemp("broken-figures") / "out"
    good, _ = two_good_results(out)
    broken = {case: broken_copy(good, out / f"train_nvd_mega_llama_{index}.json", edit)
              for index, (case, (edit, _)) in enumerate(BROKEN_FIGURES.items(), start=1)}
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = compare_main(["--results-dir", str(out)])
    return broken, code, stderr.getvalue(), (out / "compare.md").read_text()


@pytest.mark.parametrize("case", list(BROKEN_FIGURES))
def test_non_finite_or_negative_figures_are_invalid(broken_figures_compared: tuple[dict[str, Path], int, str, str],
                                                    capsys: pytest.CaptureFixture[str], case: str) -> None:
    broken_files, compare_code, compare_stderr, report = broken_figures_compared
    broken, field = broken_files[case], BROKEN_FIGURES[case][1]

    code, stdout, _ = run(capsys, validate_main, str(broken))
    assert code == 1
    error = next(line for line in stdout.splitlines() if line.startswith("ERROR"))
    assert str(broken) in error and f"{field}:" in error  # the file and the first problem
    assert "overall: INVALID" in stdout

    # compare leaves it out, names it (with its own problem), and compares the others.
    assert compare_code == 0
    warning = next(line for line in compare_stderr.splitlines() if line.startswith(f"warning: skipping {broken}:"))
    assert field in warning
    assert f"`{broken.name}`" in report


def unusable_entries(out: Path) -> dict[str, str]:
    """Entries named like results that are not readable result files -> what the loader must say."""
    (out / "train_amd_mega_llama.json").mkdir()
    (out / "train_nvd_mega_llama.json").symlink_to("train_nvd_mega_llama.json")  # a link to itself
    (out / "train_amd_tran_llama.json").symlink_to(out / "gone.json")
    os.mkfifo(out / "train_nvd_tran_llama.json")  # reading it would block forever
    return {"train_amd_mega_llama.json": "a directory", "train_nvd_mega_llama.json": "a symlink loop",
            "train_amd_tran_llama.json": "a symlink to a missing file", "train_nvd_tran_llama.json": "a FIFO"}


def test_unusable_entries_are_named_by_validate_and_compare(tmp_path: Path) -> None:
    # In a child process with a timeout: a loader that opened the FIFO would hang, not fail.
    out = tmp_path / "out"
    two_good_results(out)
    expected = unusable_entries(out)
    proc = run_module("evaluate.validate", str(out), env=SUBPROCESS_ENV, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name, what in expected.items():
        assert f"ERROR   {name}: {out / name}: unreadable: {what}" in proc.stdout
        assert any(line.startswith(name) and "UNREADABLE" in line for line in proc.stdout.splitlines())

    proc = run_module("evaluate.compare", "--results-dir", str(out), env=SUBPROCESS_ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = (out / "compare.md").read_text()
    for name, what in expected.items():
        assert f"warning: skipping {out / name}: {out / name}: unreadable: {what}" in proc.stderr
        assert f"`{name}`" in report


def test_a_loop_given_by_name_is_named_not_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "train_amd_prim_llama.json"
    loop.symlink_to(loop.name)
    code, stdout, _ = run(capsys, validate_main, str(loop))
    assert code == 1
    assert f"{loop}: unreadable: a symlink loop" in stdout


def test_permission_denied_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    good, locked = two_good_results(out)
    if os.geteuid() != 0:
        locked.chmod(0)
    else:  # root reads any file: a stand-in for the denied read, at the same call the loader makes
        real_read = utils.io.json_input._read_bounded

        def denied(path: Path, max_bytes: int) -> bytes:
            if path == locked:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_read(path, max_bytes)

        monkeypatch.setattr(utils.io.json_input, "_read_bounded", denied)
    code, stdout, _ = run(capsys, validate_main, str(out))
    assert code == 1
    assert f"ERROR   {locked.name}: {locked}: unreadable:" in stdout and "Permission denied" in stdout
    code, _, stderr = run(capsys, compare_main, "--results-dir", str(out))
    assert code == 0  # the readable result is still compared
    assert f"warning: skipping {locked}" in stderr and "Permission denied" in stderr
    assert f"`{locked.name}`" in (out / "compare.md").read_text() and good.name not in stderr


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        (["amd=inf"], "the price must be a finite number of dollars greater than 0"),
        (["nvd=nan"], "the price must be a finite number of dollars greater than 0"),
        (["amd=1e400"], "the price must be a finite number of dollars greater than 0"),
        (["amd=-2.5"], "the price must be a finite number of dollars greater than 0"),
        (["amd=0"], "the price must be a finite number of dollars greater than 0"),
        (["amd=cheap"], "'cheap' is not a number"),
        (["amd="], "'' is not a number"),
        (["amd"], "expected PLATFORM=DOLLARS"),
        (["amd=2", "amd=3"], "amd is given twice"),
    ],
    ids=["inf", "nan", "overflow", "negative", "zero", "word", "empty", "no-value", "twice"],
)
def test_bad_prices_are_clear_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], prices: list[str],
                                           message: str) -> None:
    two_good_results(tmp_path / "out")
    with pytest.raises(SystemExit) as info:
        compare_main(["--results-dir", str(tmp_path / "out"), "--price-per-gpu-hour", *prices])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--price-per-gpu-hour {prices[-1]!r}: {message}" in err
    assert not (tmp_path / "out" / "compare.md").exists()


def assert_one_line_write_error(code: int, stderr: str, fragment: str) -> None:
    assert code == compare.EXIT_WRITE == 2  # never 1, which means "unfair"
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and fragment in lines[0]


def test_output_dir_that_is_a_file_is_a_write_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    two_good_results(out)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    code, _, stderr = run(capsys, compare_main, "--results-dir", str(out), "--output-dir", str(blocker / "sub"))
    assert_one_line_write_error(code, stderr, f"cannot create the output directory {blocker / 'sub'}")


def test_report_path_taken_by_a_directory_is_a_write_error(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    two_good_results(out)
    (out / "compare.md").mkdir()
    code, _, stderr = run(capsys, compare_main, "--results-dir", str(out))
    assert_one_line_write_error(code, stderr, f"cannot write {out / 'compare.md'}: Is a directory")
    assert not list(out.glob(".compare.md.tmp*"))  # the temporary file is gone


def test_full_disk_is_a_write_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    two_good_results(out)

    def no_space(path: Path, text: str, fsync: bool = False) -> Path:  # stand-in for a full disk at the write
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(outputs, "atomic_write_text", no_space)
    code, stdout, stderr = run(capsys, compare_main, "--results-dir", str(out))
    assert_one_line_write_error(code, stderr, f"cannot write {out / 'compare.md'}: No space left on device")
    assert stdout == ""  # no console tables for a comparison that was not saved


def test_zero_throughput_gets_no_cost_and_no_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A schema-valid but absurd file (zero tokens/s) is compared without a division by zero; validate fails it."""
    out = tmp_path / "out"
    path = make_result(out, "amd", "prim", mutate=lambda r: setattr(r.performance_metrics,
                                                                    "tokens_per_second_per_gpu", 0.0))
    code, _, stderr = run(capsys, compare_main, "--results-dir", str(out), "--price-per-gpu-hour", "amd=2")
    assert code == 0, stderr
    assert "| AMD Primus | 1 ok | 0.0 (1 run) |" in (out / "compare.md").read_text()
    assert "| n/a |" in (out / "compare.md").read_text()
    code, stdout, _ = run(capsys, validate_main, str(path))
    assert code == 1 and "tokens_per_second_per_gpu 0.0 x 8 GPUs does not give tokens_per_second" in stdout
