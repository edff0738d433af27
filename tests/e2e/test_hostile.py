"""Every entry point against hostile values of every numeric config key: one line, non-zero, no traceback, no secret.

The keys and their bounds come from the config's own tables (``utils.config.model.numeric_keys()``,
``utils.config.rules.RULES``), so a key added there is walked here without anyone writing a test
for it. Each key gets values of four kinds: non-finite, negative, huge (beyond its maximum, or
beyond what a float holds) and malformed (``12abc``, ``1_0``, a non-ASCII digit, ``0x10``...).

* Python entry points (every ``python -m`` CLI that reads the config): every key x every value,
  called in-process for speed (an uncaught exception is the traceback this forbids).
* Shell entry points: each runs as a real process in a copy of the repository, with every kind of
  value and, across them, every key (they hand the values to the same loader the walk above covers
  exhaustively; what is checked here is that the shell passes the one line on and starts nothing).

HF_TOKEN is set in every run; it must not appear in any output.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.shell import clean_env, run_script
from tests.helpers.workload import tiny_environ
from utils.config.model import FIELD_TYPES, numeric_keys
from utils.config.rules import RULES, base_type

TOKEN = "hf_HOSTILEtokenneverprinted0123"
KEYS = numeric_keys()


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def hostile_values(key: str) -> dict[str, list[str]]:
    """The values of each kind for ``key``, from its type and its row of RULES."""
    kind, _optional = base_type(FIELD_TYPES[key.lower()])
    rule = RULES[key.lower()]
    assert rule.maximum is not None, f"{key} has no maximum: no value is too large for it"
    huge = [_number(rule.maximum * 10 + 1), str(10**30)]
    values = {
        "non-finite": ["nan", "inf", "-inf", "Infinity", "1e400"],
        "negative": ["-1", "-1e-9"] if kind is float else ["-1"],
        "huge": huge if kind is float else [*huge, str(2**63)],
        "malformed": ["12abc", "1.2.3", "0x10", "--1", "1_0", "\u0663", "1,5"] + ([] if kind is float else ["1.5"]),
    }
    if rule.minimum is not None and rule.minimum > 0 and kind is int:
        values["negative"].append("0")  # below a minimum of one
    return values


def _all_values(key: str) -> list[str]:
    return [value for values in hostile_values(key).values() for value in values]


# ---------------------------------------------------------------------------
# Python entry points, in-process


def _main(module: str):
    import importlib

    return importlib.import_module(module).main


PYTHON_ENTRY_POINTS: dict[str, tuple[str, list[str]]] = {
    "utils.config.load": ("utils.config.load", []),
    "utils.machine.hardware": ("utils.machine.hardware", ["--platform"]),
    "utils.files.disk": ("utils.files.disk", ["check-output"]),
    "utils.files.locks": ("utils.files.locks", ["path", "data"]),
    "utils.files.purge": ("utils.files.purge", ["--dry-run", "--with-data"]),
    "utils.files.wrap": ("utils.files.wrap", []),
    "utils.machine.rendezvous": ("utils.machine.rendezvous", []),
    "utils.files.run_owner": ("utils.files.run_owner", ["start", "--result", "{tmp}/out/train_cpu_tran_llama.json",
                                                        "--platform",
                                            "cpu", "--framework", "tran", "--model", "llama", "--run-id", "r1",
                                                        "--lock-fd", "9", "--holder-pid", "1"]),
    "utils.files.build_context": ("utils.files.build_context", ["{tmp}/context"]),
    "utils.dataset.fingerprint": ("utils.dataset.fingerprint", ["--model", "llama"]),
    "utils.measure.memory": ("utils.measure.memory", ["--framework", "tran"]),
    "train.launch.jobs": ("train.launch.jobs", []),
    # ``python -m train.launch`` runs train/launch/__main__.py, which calls train.launch.launcher's main
    "train.launch --dry-run": ("train.launch.launcher", ["--platform", "cpu", "--framework", "tran", "--model",
                                                         "llama", "--dry-run"]),
    "train.launch": ("train.launch.launcher", ["--platform", "cpu", "--framework", "tran", "--model", "llama"]),
    "train.tran.worker": ("train.tran.worker", ["--model", "llama", "--result", "{tmp}/r.json"]),
    "train.nemo.entry": ("train.nemo.entry", ["--model", "llama", "--result", "{tmp}/r.json"]),
    "data.fetch": ("data.fetch", ["--no-progress"]),
    "data.clean": ("data.clean", ["--no-progress"]),
    "data.encode": ("data.encode", ["--no-progress"]),
    "data.verify": ("data.verify", ["--no-progress"]),
    "evaluate.compare": ("evaluate.compare", []),
    "evaluate.validate": ("evaluate.validate", []),
    "evaluate.extract": ("evaluate.extract", ["{tmp}/run.log", "--platform", "amd", "--framework", "mega",
                                              "--model", "llama", "--from-config"]),
    "train.launch.preflight": ("train.launch.preflight",
                               ["--platform", "cpu", "--framework", "tran", "--model", "llama"]),
}


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Some entry points install SIGINT/SIGTERM handlers for their run; the test process keeps its own."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _call(main, argv: list[str]) -> int:
    with _signals_kept():
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code if isinstance(code, int) else 1


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("entry", sorted(PYTHON_ENTRY_POINTS))
def test_python_entry_point_refuses_every_hostile_value(entry: str, key: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    module, argv = PYTHON_ENTRY_POINTS[entry]
    main = _main(module)
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    (tmp_path / "context").mkdir()
    (tmp_path / "run.log").write_text(" iteration        1/      10 | consumed samples: 64 |\n")
    base = tiny_environ(tmp_path / "data", tmp_path / "out", HF_TOKEN=TOKEN)
    for name in (*KEYS, "GBS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in base.items():
        monkeypatch.setenv(name, value)
    for value in _all_values(key):
        monkeypatch.setenv(key, value)
        code = _call(main, argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        where = f"{entry} with {key}={value!r}: exit {code}, stderr {err!r}"
        assert code != 0, where
        assert len(lines) == 1 and f"{key}=" in lines[0], where
        assert "Traceback" not in out + err and TOKEN not in out + err, where
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("train_*.json")), "nothing ran"


# ---------------------------------------------------------------------------
# Shell entry points, real processes

SHELL_ENTRY_POINTS = ["shell/train.sh", "shell/train.sh --dry-run", "shell/data.sh", "shell/purge.sh",
                      "shell/wrap.sh", "shell/build.sh", "shell/run_train.sh", "shell/run_data.sh",
                      "shell/run_purge.sh", "shell/run_wrap.sh", "shell/entry.sh", "shell/quickstart.sh",
                      "train/train_cpu_tran_llama.sh"]
# quickstart.sh sets these itself (a single-process cpu layout), so values of them never reach it.
QUICKSTART_SETS = {"TP", "PP", "CP", "NNODES", "NODE_RANK"}
KINDS = ("non-finite", "negative", "huge", "malformed")


def _shell_cases() -> list[tuple[str, str, str]]:
    """Every script with every kind, stepping through the keys so that every key is sent too."""
    cases, index = [], 0
    for script in SHELL_ENTRY_POINTS:
        for kind in KINDS:
            key = KEYS[index % len(KEYS)]
            while script == "shell/quickstart.sh" and key in QUICKSTART_SETS:
                index += 1
                key = KEYS[index % len(KEYS)]
            values = hostile_values(key)[kind]
            cases.append((script, key, values[index % len(values)]))
            index += 1
    for key in KEYS[index:]:
        values = _all_values(key)
        cases.append((SHELL_ENTRY_POINTS[index % len(SHELL_ENTRY_POINTS)], key, values[index % len(values)]))
        index += 1
    return cases


def test_the_shell_walk_sends_every_key_and_every_kind() -> None:
    cases = _shell_cases()
    assert {key for _, key, _ in cases} == set(KEYS)
    for script in SHELL_ENTRY_POINTS:
        sent = [value for s, key, value in cases if s == script]
        assert len(sent) >= len(KINDS)


@pytest.fixture(scope="module")
def repo_copy(shared_repo: Path) -> Path:
    """The module's copy (tests/e2e/conftest.py) with a stand-in setup.sh: never the real one."""
    (shared_repo / "shell" / "setup.sh").write_text("#!/usr/bin/env bash\necho 'setup: stand-in'\n")
    return shared_repo


@pytest.mark.parametrize(("script", "key", "value"), _shell_cases())
def test_shell_entry_point_refuses_with_one_line(repo_copy: Path, tmp_path: Path, script: str, key: str,
                                                 value: str) -> None:
    name, *args = script.split()
    env = clean_env(tmp_path, PLATFORM="amd" if "build" in name else "cpu", DATA_DIR=str(tmp_path / "data"),
                    OUTPUT_DIR=str(tmp_path / "out"), HF_TOKEN=TOKEN, **{key: value})
    proc = run_script(repo_copy, name, *args, env=env, timeout=120)
    lines = proc.stderr.strip().splitlines()
    where = f"{script} with {key}={value!r}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode != 0, where
    assert len(lines) == 1 and lines[0].startswith("config error: ") and f"{key}=" in lines[0], where
    assert "Traceback" not in proc.stdout + proc.stderr and TOKEN not in proc.stdout + proc.stderr, where
    assert not (tmp_path / "docker-calls").exists() or not any(
        "build" in p.read_text() or "run" in p.read_text() for p in (tmp_path / "docker-calls").glob("*.args")), where
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists(), f"{where}: something was written"


def test_python_entry_points_cover_every_cli_that_reads_the_config() -> None:
    """A new ``python -m`` entry point that loads the config must join the walk."""
    import re

    repo = REPO
    readers = set()
    for path in [*repo.glob("utils/*.py"), *repo.glob("data/*.py"), *repo.glob("train/*.py"),
                 *repo.glob("evaluate/*.py")]:
        text = path.read_text(encoding="utf-8")
        if "def main(" in text and re.search(r"load_config\(|config_from_args\(", text):
            readers.add(f"{path.parent.name}.{path.stem}")
    walked = {module for module, _ in PYTHON_ENTRY_POINTS.values()}
    assert readers <= walked, sorted(readers - walked)
