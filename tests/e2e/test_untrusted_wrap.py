"""wrap packs only what tprimat wrote, and a secret is compared as the bytes a log would hold (issue 26).

Real processes of shell/wrap.sh in a throwaway copy of the repository (tests/helpers/shell.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.shell import REPO, clean_env, run_script
from utils.config.rules import ConfigError
from utils.config.secret import read_secret, read_secret_bytes
from utils.result.names import OUTPUT_MARKER, is_output_dir

TOKEN = "hf_UNTRUSTEDtoken0123456789abc"


def _output(tmp_path: Path, marked: bool = True) -> Path:
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    (out / "train_cpu_tran_llama.json").write_text("{}")
    (out / "logs" / "train_cpu_tran_llama.log").write_text("a log line\n")
    if marked:
        (out / ".tprimat").mkdir()
        (out / OUTPUT_MARKER).write_text("tprimat's")
    return out


def _wrap(repo: Path, tmp_path: Path, **env: str | bytes) -> subprocess.CompletedProcess:
    archive = repo / "output.zip"
    archive.unlink(missing_ok=True)
    return run_script(repo, "shell/wrap.sh", env=clean_env(tmp_path, **env))


def _names(repo: Path) -> list[str]:
    with zipfile.ZipFile(repo / "output.zip") as zipped:
        return zipped.namelist()


def test_wrap_refuses_etc_in_one_line(shared_repo: Path, tmp_path: Path) -> None:
    proc = _wrap(shared_repo, tmp_path, OUTPUT_DIR="/etc")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing OUTPUT_DIR=/etc" in lines[0] and OUTPUT_MARKER in lines[0], proc.stderr
    assert not (shared_repo / "output.zip").exists()


def test_wrap_refuses_a_folder_tprimat_did_not_write(shared_repo: Path, tmp_path: Path) -> None:
    out = _output(tmp_path, marked=False)
    proc = _wrap(shared_repo, tmp_path, OUTPUT_DIR=str(out))
    assert proc.returncode == 1 and "holds no .tprimat/output-folder marker" in proc.stderr
    (out / ".tprimat").mkdir()
    (out / OUTPUT_MARKER).symlink_to(out / "train_cpu_tran_llama.json")
    assert not is_output_dir(out), "a link is no marker"


def test_wrap_packs_only_tprimat_files_readable_by_others(shared_repo: Path, tmp_path: Path) -> None:
    out = _output(tmp_path)
    (out / "notes.txt").write_text("mine")
    (out / "shadow").write_text("root:x:0:0")
    private = out / "train_cpu_tran_qwen.json"
    private.write_text("{}")
    private.chmod(0o600)
    proc = _wrap(shared_repo, tmp_path, OUTPUT_DIR=str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(_names(shared_repo)) == ["out/logs/train_cpu_tran_llama.log", "out/train_cpu_tran_llama.json"]
    assert "left out 2 file(s) tprimat did not write: notes.txt, shadow" in proc.stderr
    assert "skipped train_cpu_tran_qwen.json (not readable by other users: mode 0600" in proc.stderr


def test_results_and_comparisons_leave_the_marker(tmp_path: Path) -> None:
    from evaluate.compare import main as compare_main
    from tests.helpers.evaluate import make_result

    out = tmp_path / "fresh"
    make_result(out, "amd", "prim")
    assert is_output_dir(out)
    elsewhere = tmp_path / "report"
    assert compare_main(["--results-dir", str(out), "--output-dir", str(elsewhere)]) == 0
    assert is_output_dir(elsewhere)


# ---------------------------------------------------------------------------
# secrets


@pytest.mark.parametrize(("line", "problem"), [
    (f'HF_TOKEN="{TOKEN}\x00x"\n', "control character"),
    (f'HF_TOKEN="{TOKEN}\x01"\n', "control character"),
    (f'HF_TOKEN="{TOKEN}\tx"\n', "control character"),
    (f'HF_TOKEN=" {TOKEN}"\n', "whitespace around it"),
    (f"HF_TOKEN='{TOKEN} '\n", "whitespace around it"),
], ids=["nul", "soh", "tab", "leading-space", "trailing-space"])
def test_a_secret_with_a_control_character_or_whitespace_is_refused(shared_repo: Path, tmp_path: Path, line: str,
                                                                    problem: str) -> None:
    secrets = tmp_path / "secrets.env"
    secrets.write_text(line)
    with pytest.raises(ConfigError, match=problem) as info:
        read_secret("HF_TOKEN", environ={}, secrets_file=secrets)
    assert TOKEN not in str(info.value) and "\n" not in str(info.value)
    (shared_repo / "secrets.env").write_text(line)
    try:
        out = _output(tmp_path)
        (out / "logs" / "train_cpu_tran_llama.log").write_text(f"token {TOKEN} in a log\n")
        proc = _wrap(shared_repo, tmp_path, OUTPUT_DIR=str(out))
    finally:
        (shared_repo / "secrets.env").unlink()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and problem in lines[0] and TOKEN not in proc.stdout + proc.stderr
    assert not (shared_repo / "output.zip").exists()


@pytest.mark.parametrize("value", [f" {TOKEN}", f"{TOKEN}\n", f"{TOKEN}\x1b"], ids=["space", "newline", "escape"])
def test_an_environment_secret_is_refused_the_same_way(value: str) -> None:
    with pytest.raises(ConfigError, match="HF_TOKEN from the environment") as info:
        read_secret_bytes("HF_TOKEN", environ={"HF_TOKEN": value})
    assert TOKEN not in str(info.value)


def test_a_token_that_is_no_utf8_is_refused_before_packing(shared_repo: Path, tmp_path: Path) -> None:
    """A token that is no UTF-8 (bytes as the process received them) is refused in one line that never shows it, and
    nothing is packed: the leak check looks for a secret's exact bytes, so a token no log could spell is refused."""
    token = TOKEN.encode() + b"\xff\xfe"
    out = _output(tmp_path)
    (out / "logs" / "train_cpu_tran_llama.log").write_bytes(b"header " + token + b" trailer")
    env = clean_env(tmp_path, OUTPUT_DIR=str(out))
    proc = subprocess.run(["bash", str(shared_repo / "shell" / "wrap.sh")], env={**env, "HF_TOKEN": token},
                          cwd=shared_repo, capture_output=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and b"HF_TOKEN from the environment" in lines[0], proc.stderr
    assert TOKEN.encode() not in proc.stdout + proc.stderr and not (shared_repo / "output.zip").exists()
    with pytest.raises(ConfigError, match="HF_TOKEN from the environment") as info:
        read_secret_bytes("HF_TOKEN", environ={"HF_TOKEN": os.fsdecode(token)})
    assert TOKEN not in str(info.value)


def test_help(shared_repo: Path) -> None:
    proc = subprocess.run(["bash", str(REPO / "shell" / "wrap.sh"), "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and OUTPUT_MARKER in proc.stdout, sys.executable


def test_every_secret_from_every_source_is_checked(shared_repo: Path, tmp_path: Path) -> None:
    """Issue 33: HF_TOKEN exported, another token in secrets.env: a file holding the second is refused too."""
    other = "hf_SECONDtokenFROMthefile0123"
    out = _output(tmp_path)
    (out / "logs" / "train_cpu_tran_llama.log").write_text(f"downloading with {other}\n")
    (shared_repo / "secrets.env").write_text(f"HF_TOKEN={other}\n")
    try:
        proc = _wrap(shared_repo, tmp_path, OUTPUT_DIR=str(out), HF_TOKEN=TOKEN)
    finally:
        (shared_repo / "secrets.env").unlink()
    assert proc.returncode == 1 and "train_cpu_tran_llama.log" in proc.stderr, proc.stderr
    assert other not in proc.stdout + proc.stderr and not (shared_repo / "output.zip").exists()
