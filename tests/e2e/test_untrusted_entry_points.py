"""Every entry point refuses an unknown flag with exit 2 and has --help; config values that cannot work are refused
before anything starts (issue 26).
"""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest

from tests.helpers.proc import free_port
from tests.helpers.shell import REPO, clean_env, copy_repo, run_script, without_comparison
from utils.config.load import duplicate_notes, load_config
from utils.config.rules import ConfigError
from utils.machine.rendezvous import resolve_problem

# Scripts that hand their arguments on to another program, which refuses an unknown option itself.
PASS_THROUGH = {"build.sh": "docker build options", "test.sh": "pytest arguments"}
SHELL_SCRIPTS = sorted(p.name for p in (REPO / "shell").glob("*.sh"))
# Internal: run by train/settings/runner.py in the framework's own Python with a JSON request on stdin, not by people.
INTERNAL_MODULES = {"train.megatron.probe", "train.nemo.probe", "train.prim.probe"}


def _modules() -> list[str]:
    found = []
    for path in sorted([*REPO.glob("utils/**/*.py"), *REPO.glob("data/*.py"), *REPO.glob("train/**/*.py"),
                        *REPO.glob("evaluate/*.py"), *REPO.glob("bench/*.py")]):
        if '__name__ == "__main__"' in path.read_text(encoding="utf-8"):
            parts = path.relative_to(REPO).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__main__" else parts)
            if module not in INTERNAL_MODULES:
                found.append(module)
    return found


@pytest.mark.parametrize("script", SHELL_SCRIPTS)
def test_every_shell_script_refuses_an_unknown_flag_and_has_help(script: str, tmp_path: Path) -> None:
    env = clean_env(tmp_path, OUTPUT_DIR=str(tmp_path / "out"), DATA_DIR=str(tmp_path / "data"))
    helped = run_script(REPO, f"shell/{script}", "--help", env=env, timeout=120)
    assert helped.returncode == 0 and helped.stdout.strip(), helped.stderr
    if script in PASS_THROUGH:
        pytest.skip(f"{script} passes {PASS_THROUGH[script]} on")
    refused = run_script(REPO, f"shell/{script}", "--bogus-flag", env=env, timeout=120)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "data").exists(), "nothing ran"


def test_quickstart_with_a_bogus_flag_runs_nothing(repo: Path, tmp_path: Path) -> None:
    (repo / "shell" / "setup.sh").write_text(f"#!/usr/bin/env bash\ntouch {tmp_path / 'setup-ran'}\n")
    proc = run_script(repo, "shell/quickstart.sh", "--bogus-flag", env=clean_env(tmp_path), timeout=60)
    assert proc.returncode == 2 and "unknown argument '--bogus-flag'" in proc.stderr
    assert not (tmp_path / "setup-ran").exists() and not (repo / "output" / "compare.md").exists()


@pytest.mark.parametrize("module", _modules())
def test_every_python_module_refuses_an_unknown_flag_and_has_help(module: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    loaded = importlib.import_module(module)
    main = getattr(loaded, "main", None) or importlib.import_module(f"{module}.__main__").main
    for argv, expected in ((["--bogus-flag"], 2), (["--help"], 0)):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == expected, (module, argv)
    assert "usage" in capsys.readouterr().out.lower()


# ---------------------------------------------------------------------------
# config values


def test_master_addr_empty_means_the_default_and_malformed_is_refused() -> None:
    assert load_config(environ={"MASTER_ADDR": ""}).master_addr == "localhost"
    assert load_config(environ={"MASTER_ADDR": "  "}).master_addr == "localhost"
    for bad in ("a b", "-x", "x..y", "host:29500", "a/b"):
        with pytest.raises(ConfigError, match=r"MASTER_ADDR=.*expected a host name or an IP address"):
            load_config(environ={"MASTER_ADDR": bad})
    assert load_config(environ={"MASTER_ADDR": "fe80::1"}).master_addr == "fe80::1"


def test_an_unresolvable_master_addr_is_one_line_within_the_bound() -> None:
    problem = resolve_problem("no-such-host.invalid", timeout=10)
    assert problem is not None and "does not resolve" in problem and "\n" not in problem
    assert resolve_problem("127.0.0.1") is None


def _train_sh(tmp_path: Path, **values: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """shell/train.sh on cpu in a copy of the repository whose jobs are stand-ins and that has no comparison (no test
    here reads it: tests/helpers/shell.py ``without_comparison``); (its run, the jobs that ran)."""
    repo = without_comparison(copy_repo(tmp_path / "repo"))
    log = tmp_path / "jobs.log"
    for script in (repo / "train").glob("train_cpu_*.sh"):
        script.write_text(f"#!/usr/bin/env bash\necho {script.name} >> {log}\n")
    settings = {"PLATFORM": "cpu", "FRAMEWORK": "tran", "MODELS": "llama", "MODEL_SIZE": "tiny",
                "OUTPUT_DIR": str(tmp_path / "out"), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    proc = run_script(repo, "shell/train.sh", env=clean_env(tmp_path, **{**settings, **values}), timeout=300)
    return proc, log.read_text().splitlines() if log.exists() else []


def _one_line_refusal(proc: subprocess.CompletedProcess, ran: list[str], fragment: str) -> None:
    assert proc.returncode == 2 and not ran, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr


def test_train_sh_refuses_an_unresolvable_master_addr_before_any_job(tmp_path: Path) -> None:
    proc, ran = _train_sh(tmp_path, MASTER_ADDR="no-such-host.invalid")
    _one_line_refusal(proc, ran, "MASTER_ADDR='no-such-host.invalid' does not resolve")


def test_every_list_setting_is_deduplicated_with_a_note() -> None:
    cfg = load_config(environ={"MODELS": "llama qwen llama", "FRAMEWORK": "tran,deep tran"})
    assert cfg.models == ("llama", "qwen") and cfg.framework == ("tran", "deep")
    notes = duplicate_notes(environ={"MODELS": "llama qwen llama", "FRAMEWORK": "tran,deep tran"})
    assert notes == ["note: FRAMEWORK lists tran more than once; each runs once (FRAMEWORK=tran deep)",
                     "note: MODELS lists llama more than once; each runs once (MODELS=llama qwen)"]


def test_a_repeated_model_runs_once(tmp_path: Path) -> None:
    proc, ran = _train_sh(tmp_path, MODELS="llama llama")
    assert ran == ["train_cpu_tran_llama.sh"], proc.stdout + proc.stderr
    assert "note: MODELS lists llama more than once" in proc.stdout
    assert "1 job(s)" in proc.stdout


def test_model_size_full_on_cpu_is_refused_before_starting(tmp_path: Path) -> None:
    proc, ran = _train_sh(tmp_path, MODEL_SIZE="full")
    _one_line_refusal(proc, ran, "MODEL_SIZE=full on PLATFORM=cpu")
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "utils.config.load", "--before-launch", "cpu"],
                          env=clean_env(tmp_path, MODEL_SIZE="full"), cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("config error: MODEL_SIZE=full on PLATFORM=cpu")


@pytest.mark.parametrize("key", ["OUTPUT_DIR", "DATA_DIR", "HF_HOME", "MEGATRON_PATH", "MASTER_ADDR", "DATASET"])
def test_a_control_character_in_a_path_or_name_is_refused(key: str) -> None:
    value = "/tmp/a\nphantom" if key != "DATASET" else "local:/tmp/a\nb.jsonl"
    with pytest.raises(ConfigError) as info:
        load_config(environ={key: value})
    message = str(info.value)
    assert message.startswith(f"{key}=") and "control character (\\n)" in message and "\n" not in message


def test_train_sh_runs_no_phantom_job_for_a_newline_in_output_dir(tmp_path: Path) -> None:
    proc, ran = _train_sh(tmp_path, OUTPUT_DIR=f"{tmp_path / 'out'}\nphantom")
    _one_line_refusal(proc, ran, "config error: OUTPUT_DIR=")
    assert "control character" in proc.stderr
