"""utils/config/envfile.py and utils/config/secret.py: KEY=value files read exactly as bash reads them.

Every accepted line is checked against a real bash sourcing the same line; lines bash would read
differently (expansion, an open quote, a command separator) are refused, the three documented
departures (CRLF, a byte-order mark, unquoted lists) are what the writer meant, and a secrets file's
error never shows its line or value.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from utils.config.envfile import EnvFileError, parse_env_text, read_env_file
from utils.config.rules import ConfigError
from utils.config.secret import docker_env_lines, read_secret

SHELL_LINES = [
    "K=plain",
    "K=",
    "K=''",
    'K=""',
    "export K=exported",
    "export\tK=tab",
    "   K=indented",
    "K=value # comment",
    "K= # only a comment",
    "K=value\t# tab comment",
    "K=a#b",
    "K=#not-a-comment",
    "K='single quoted # not a comment'",
    'K="double quoted # not a comment"',
    "K='it'\\''s'",
    'K="a\\"b\\\\c\\$d"',
    'K="back\\slash kept"',
    "K=esc\\ aped",
    "K=mix'ed'\"quo\"tes",
    "K=~/tilde",
    "K='~/tilde'",
    "K=a=b=c",
    "K=café-東京",
    "K=*.glob?",
    "K='$(not run)'",
]


def bash_value(line: str, tmp_path: Path) -> str:
    script = tmp_path / "line.env"
    script.write_text(line + "\n")
    proc = subprocess.run(["bash", "-c", 'set -e; . "$1"; printf %s "$K"', "bash", str(script)],
                          capture_output=True, text=True, timeout=30, env={"HOME": "/home/someone"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("line", SHELL_LINES)
def test_accepted_lines_read_as_bash_reads_them(line: str, tmp_path: Path) -> None:
    expected = bash_value(line, tmp_path)
    parsed = parse_env_text(line, "f.env")["K"]
    if line.startswith("K=~"):
        # bash expands an unquoted ~ in an assignment; the loader leaves it to the key's type (Path keys
        # expand it, see utils/config/load.py), so the text differs only by that expansion.
        assert expected == "/home/someone/tilde" and parsed == "~/tilde"
    else:
        assert parsed == expected


@pytest.mark.parametrize("text", ["K=crlf\r\n", "# c\r\nexport K='crlf'  # x\r\n", "\ufeffK=crlf\n"])
def test_crlf_and_a_byte_order_mark_are_what_the_user_meant(text: str) -> None:
    """bash would keep the CR in the value (and fail on a BOM); an editor put them there, not the user."""
    assert parse_env_text(text, "f.env") == {"K": "crlf"}


@pytest.mark.parametrize(("line", "value"), [
    ("K=llama qwen", "llama qwen"), ("K=tran   mega # run order", "tran mega"), ("K='a b' c", "a b c"),
])
def test_an_unquoted_list_is_one_value(line: str, value: str) -> None:
    """bash would run the second word as a command; the loader has always read MODELS=llama qwen as a list."""
    assert parse_env_text(line, "f.env") == {"K": value}


@pytest.mark.parametrize(("line", "problem"), [
    ("K=$HOME/x", "would expand"),
    ('K="$HOME"', "would expand"),
    ("K=`date`", "would expand"),
    ("K='open", "unterminated single quote"),
    ('K="open', "unterminated double quote"),
    ("K=trailing\\", "trailing backslash"),
    ("K=a;b", "ends a shell command"),
    ("K=a|b", "ends a shell command"),
    ("not an assignment", "expected KEY=value"),
    ("export", "expected KEY=value"),
    ("1K=x", "expected KEY=value"),
])
def test_lines_bash_would_read_differently_are_refused(line: str, problem: str) -> None:
    with pytest.raises(EnvFileError) as excinfo:
        parse_env_text(f"# first\n{line}\n", "f.env")
    assert str(excinfo.value).startswith("f.env:2: ") and problem in str(excinfo.value)


def test_later_assignment_wins_as_in_a_shell() -> None:
    assert parse_env_text("K=1\nK=2\n", "f.env") == {"K": "2"}


@pytest.mark.parametrize("line", [
    "HF_TOKEN='hf_SECRETvalue12345", "hf_SECRETvalue12345", "HF_TOKEN=hf_SECRETvalue12345;x",
])
def test_secret_errors_never_show_the_line(line: str, tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text(f"{line}\n")
    with pytest.raises(EnvFileError) as excinfo:
        read_env_file(path, secret=True)
    assert "hf_SECRET" not in str(excinfo.value) and f"{path}:1" in str(excinfo.value)
    with pytest.raises(ConfigError) as excinfo:
        read_secret("HF_TOKEN", environ={}, secrets_file=path)
    assert "hf_SECRET" not in str(excinfo.value)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(EnvFileError, match=r"cannot read config file .*absent\.env"):
        read_env_file(tmp_path / "absent.env", label="config file")
    binary = tmp_path / "binary.env"
    binary.write_bytes(b"K=\xff\xfe\n")
    with pytest.raises(EnvFileError, match="is not UTF-8"):
        read_env_file(binary)


@pytest.mark.parametrize("text", [
    "HF_TOKEN=hf_ABCdef123\n", "HF_TOKEN=hf_ABCdef123 # mine\n", "HF_TOKEN=hf_ABCdef123\r\n",
    "export HF_TOKEN=\"hf_ABCdef123\"\n", "HF_TOKEN='hf_ABCdef123'\n",
])
def test_the_token_is_the_same_however_the_line_is_written(text: str, tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_bytes(text.encode())
    assert read_secret("HF_TOKEN", environ={}, secrets_file=path) == "hf_ABCdef123"
    assert docker_env_lines({"MBS": "1"}, environ={}, secrets_file=path) == ["MBS=1", "HF_TOKEN=hf_ABCdef123"]


def test_environment_wins_and_an_empty_value_is_no_token(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("HF_TOKEN=\n")
    assert read_secret("HF_TOKEN", environ={}, secrets_file=path) is None
    assert read_secret("HF_TOKEN", environ={"HF_TOKEN": "hf_env"}, secrets_file=path) == "hf_env"
    assert docker_env_lines({}, environ={}, secrets_file=path) == []
