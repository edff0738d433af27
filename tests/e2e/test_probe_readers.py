"""Issue 33, family 4: every reader is bounded and refuses what is not a regular file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.compare import main as compare_main
from tests.helpers.evaluate import make_result
from tests.helpers.paths import FIXTURES, REPO
from tests.helpers.shell import clean_env
from utils.files.disk import OutputDirError, check_writable_dir
from utils.io.output_path import LOCK_DIR
from utils.result.file import read_result


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_gpu_check_refuses_a_prescreen_that_is_no_regular_file(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "check"
    make_result(out, "nvd", "tran", GPUS_PER_NODE="1", DP="1")
    if kind == "fifo":
        prescreen = tmp_path / "prescreen.json"
        os.mkfifo(prescreen)
    else:
        prescreen = Path("/dev/zero")
    proc = subprocess.run([sys.executable, "-m", "evaluate.gpu_check", "--results-dir", str(out), "--platform", "nvd",
                           "--prescreen", str(prescreen), "--out-dir", str(tmp_path), "--frameworks", "tran"],
                          cwd=REPO, env=clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    assert "not a regular file" in proc.stdout + (tmp_path / "gpu_check.md").read_text()


@pytest.mark.parametrize("end", ["\r", "\r\n"], ids=["cr", "crlf"])
def test_a_megatron_log_with_cr_only_line_ends_reads_every_step(tmp_path: Path, end: str) -> None:
    from evaluate.extract import main as extract_main

    text = (FIXTURES / "logs" / "megatron_core012_llama.log").read_text()
    log = tmp_path / "cr.log"
    log.write_bytes(text.replace("\n", end).encode())
    target = tmp_path / "result.json"
    extract_main([str(log), "--platform", "nvd", "--model", "llama", "--output", str(target)])
    result = read_result(target)
    assert len(result.step_times) == 10, result.step_times


def test_one_unreadable_result_leaves_the_others_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A result too big for memory (the probe's 510 MB file) is that file's problem only."""
    import utils.result.admit as gate  # every reader of a result reads through the one gate

    out = tmp_path / "out"
    make_result(out, "nvd", "tran")
    big = make_result(out, "amd", "tran")
    real = gate.read_result

    def read(path: Path):
        if Path(path) == big:
            raise MemoryError
        return real(path)

    monkeypatch.setattr(gate, "read_result", read)
    assert compare_main(["--results-dir", str(out)]) == 0
    err = capsys.readouterr().err
    assert "too large to read into memory" in err and "Traceback" not in err


def test_a_sequence_longer_than_the_shape_is_refused_before_launch(tmp_path: Path) -> None:
    env = clean_env(tmp_path, PLATFORM="cpu", MODEL_SIZE="tiny", SL="2147483647")
    proc = subprocess.run([sys.executable, "-m", "utils.config.load", "--before-launch", "cpu"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "SL=2147483647 is longer than" in proc.stderr


def test_the_output_check_refuses_a_folder_whose_bookkeeping_cannot_be_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_DIR).write_text("a file where the locks and reserves go")
    with pytest.raises(OutputDirError, match="bookkeeping folder"):
        check_writable_dir(out)
    check_writable_dir(tmp_path / "fine")  # and a good folder passes, leaving no probe behind
    assert list((tmp_path / "fine").iterdir()) == []


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_local_dataset_that_is_no_regular_file_is_one_line(tmp_path: Path, kind: str) -> None:
    from data.common import DataError
    from data.fetch import local_files

    if kind == "fifo":
        source = tmp_path / "corpus.jsonl"
        os.mkfifo(source)
    else:
        source = Path("/dev/zero")
    with pytest.raises(DataError, match="not a regular file"):
        local_files(f"local:{source}")


@pytest.mark.parametrize(("line", "problem"), [("[" * 100_000 + "]" * 100_000, "nested"),
                                               ('{"text": "a\\ud800b"}', "lone surrogate")])
def test_a_hostile_jsonl_line_is_one_line(tmp_path: Path, line: str, problem: str) -> None:
    from data.common import DataError, iter_jsonl_texts

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"text": "fine"}\n' + line + "\n")
    with pytest.raises(DataError, match=problem):
        list(iter_jsonl_texts(path))


def test_a_tokenizer_whose_merges_name_unknown_tokens_is_one_line(tmp_path: Path) -> None:
    """The tokenizers library raises a bare Exception here; the loader says it in one line."""
    from utils.dataset.paths import TokenizerMissingError, load_tokenizer

    folder = tmp_path / "tok"
    folder.mkdir()
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                 "pre_tokenizer": None, "post_processor": None, "decoder": None,
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                           "vocab": {"a": 0, "b": 1}, "merges": ["x y"]}}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    with pytest.raises(TokenizerMissingError, match="cannot load the tokenizer") as caught:
        load_tokenizer(folder)
    assert "\n" not in str(caught.value)


def test_a_log_of_more_steps_than_a_result_holds_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A result's arrays hold at most MAX_STEPS entries (utils/schema/block.py): a longer log is refused in one line
    before its result is built, never a validation traceback (the bound made small here: a log of 10 steps)."""
    import train.logs.assemble as assemble
    from evaluate.extract import main as extract_main

    monkeypatch.setattr(assemble, "MAX_STEPS", 5)
    code = extract_main([str(FIXTURES / "logs" / "megatron_core012_llama.log"), "--platform", "nvd", "--model",
                         "llama", "--output", str(tmp_path / "result.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "10 steps, more than a result holds (5" in err[0], err
    assert not (tmp_path / "result.json").exists()
