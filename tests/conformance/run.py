"""Every conformance suite in one command: the framework Pythons built from pinned files, one table of results.

Why: the Primus suite failed 24 of 25 for two days because running the suites against fetched
trees was a manual chore nobody repeated after a change to the probes (issue 40). This command
takes the fetched trees' paths, builds the framework Pythons from the constraint files in
``tests/conformance/constraints/`` (only when a file changed: each Python's folder is named by
the hash of the files it was built from), runs every suite one after another (a failing suite
never stops the next) and prints one row per suite: passed, failed, skipped and the time.

    python -m tests.conformance.run \\
        --megatron 847781764f=/path/megatron-lm_847781764f \\
        --megatron core_v0.12.0=/path/megatron-lm_core_v0.12.0 \\
        --megatron 3cdfd613=/path/megatron-lm_3cdfd613 \\
        --primus v0.5.0=/path/primus_v0.5.0 [--record FILE] [--json FILE]

The trees are given, never fetched (docs/CONFORMANCE.md section 2 says how to get them). A
suite whose tree is not given is skipped with that reason, and the exit status is 1 unless
``--allow-missing``. Exit status 0 only when every suite has 0 failed. Each suite runs in the
shared ``.venv`` (the tests import tprimat; only the probes run in the framework Pythons) with
exactly the variables docs/CONFORMANCE.md names, ``-p no:cacheprovider -n 0``, and its junit
XML and log in ``--out``. Run it before resolving any issue that touches ``train/`` or ``data/``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "tests" / "conformance" / "constraints"
CONFORMANCE = REPO / "tests" / "conformance"
BUILD_MARK = ".tprimat-built-from"  # written last, atomically: a Python without it is rebuilt
TORCH = "torch==2.13.0"  # the CPU wheel, first and alone (shell/setup.sh), so nothing pulls a CUDA build
# Python 3.11.7's bundled pip 23.2.1 stops resolving nemo-requirements.txt with a TypeError (an installed
# distribution's version read as None); the pip the hand-built Pythons used resolves it.
PIP = "pip==26.3"
# The Megatron-LM lines docs/CONFORMANCE.md documents, by the name a user gives them.
DOCUMENTED_LINES = {
    "847781764f": "847781764fe468c90caec16309deded245c1022c",
    "core_v0.12.0": "d580efc68a9f0dbf1945f834f6f6200cd01d3343",
    "3cdfd613": "3cdfd613e68e8b734a3b9e28de579daaf81f4503",
}
MEGATRON_REF_LINE = "847781764f"  # config.env's MEGATRON_REF, Primus v0.5.0's submodule
LEGACY_LINE = "core_v0.12.0"  # the line tools/preprocess_data.py is also judged at (BOS_POLICY=tokenizer)


class UsageError(ValueError):
    """A bad argument: one line, exit status 2."""


@dataclass(frozen=True)
class PythonSpec:
    """A framework Python: the files it is built from and the steps after the install."""

    name: str
    requirements: str
    constraints: str
    remove: tuple[str, ...] = ()  # uninstalled after the install (torchvision: CUDA operators over a CPU torch)

    def files(self) -> list[Path]:
        return [CONSTRAINTS / self.requirements, CONSTRAINTS / self.constraints]

    def digest(self) -> str:
        """The hash that names the build: both files and the steps (a changed line rebuilds the Python)."""
        hasher = hashlib.sha256(f"{TORCH}|{','.join(self.remove)}".encode())
        for path in self.files():
            hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        return hasher.hexdigest()


PYTHONS = {
    "megatron-amd": PythonSpec("megatron-amd", "megatron-requirements.txt", "megatron-amd.txt"),
    "megatron-nvd": PythonSpec("megatron-nvd", "megatron-requirements.txt", "megatron-nvd.txt"),
    "nemo": PythonSpec("nemo", "nemo-requirements.txt", "nemo.txt", remove=("torchvision",)),
}


def python_dir(envs: Path, spec: PythonSpec) -> Path:
    return envs / f"{spec.name}-{spec.digest()[:12]}"


def _run_logged(command: Sequence[str], log: Path, timeout: int = 3600) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(list(command), stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:6])} ... exited {done.returncode} (log: {log})")


def build_python(spec: PythonSpec, envs: Path, base_python: str, log_dir: Path) -> tuple[Path, str]:
    """The Python of ``spec`` (built now unless its folder carries the mark of the same files); (python, note)."""
    target = python_dir(envs, spec)
    python = target / "bin" / "python"
    mark = target / BUILD_MARK
    if mark.is_file() and mark.read_text(encoding="utf-8").strip() == spec.digest() and python.is_file():
        return python, f"{spec.name}: reused {target}"
    shutil.rmtree(target, ignore_errors=True)
    envs.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"build-{spec.name}.log"
    started = time.monotonic()
    constraints = str(CONSTRAINTS / spec.constraints)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run_logged([base_python, "-m", "venv", str(target)], log)
    _run_logged([*pip, "--upgrade", PIP], log)
    _run_logged([*pip, TORCH, "-c", constraints], log)
    _run_logged([*pip, "-r", str(CONSTRAINTS / spec.requirements), "-c", constraints], log)
    if spec.remove:
        _run_logged([str(python), "-m", "pip", "uninstall", "--yes", *spec.remove], log)
    cuda = subprocess.run([str(python), "-c", "import torch; print(torch.version.cuda)"], capture_output=True,
                          text=True, check=False).stdout.strip()
    if cuda != "None":
        raise RuntimeError(f"{spec.name}: a CUDA build of torch was installed ({cuda}); expected the CPU wheel")
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=False).stdout
    (target / "tprimat-freeze.txt").write_text(freeze, encoding="utf-8")
    partial = mark.with_name(mark.name + ".partial")
    partial.write_text(spec.digest() + "\n", encoding="utf-8")
    partial.replace(mark)
    return python, f"{spec.name}: built {target} in {time.monotonic() - started:.0f} s"


def drift(spec: PythonSpec, python: Path) -> list[str]:
    """Packages whose installed version is not the constraint file's pin (a note in the table, not a failure)."""
    pins = {}
    for line in (CONSTRAINTS / spec.constraints).read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, version = line.split("==", 1)
            pins[_normal(name)] = version.strip()
    freeze = python.parent.parent / "tprimat-freeze.txt"
    lines = freeze.read_text(encoding="utf-8").splitlines() if freeze.is_file() else []
    found = []
    for line in lines:
        if "==" not in line:
            continue
        name, version = line.split("==", 1)
        wanted = pins.get(_normal(name))
        if wanted is not None and version.split("+")[0] != wanted.split("+")[0]:
            found.append(f"{name} {version} (pinned {wanted})")
    return found


def _normal(name: str) -> str:
    return name.split("[")[0].strip().lower().replace("_", "-")


def package_version(python: Path, package: str) -> str | None:
    """The version ``python`` itself reports for ``package`` (not the constraint file's)."""
    code = f"import importlib.metadata as m\ntry: print(m.version({package!r}))\nexcept Exception: print('')"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False).stdout.strip()
    return out or None


# ---------------------------------------------------------------------------
# trees


@dataclass(frozen=True)
class Tree:
    name: str
    path: Path
    commit: str | None


def tree_commit(path: Path) -> str | None:
    from train.rules.versions import tree_commit as recorded

    commit, _ = recorded(path)
    return commit


def parse_tree(text: str, option: str, documented: dict[str, str] | None) -> Tree:
    """``NAME=PATH``: the tree must exist and, where NAME is a documented line, be at its commit."""
    name, sep, where = text.partition("=")
    if not sep or not name or not where:
        raise UsageError(f"{option} {text!r}: expected NAME=PATH (e.g. {option} 847781764f=/trees/megatron-lm)")
    path = Path(where).expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"{option} {name}={where}: no such folder")
    commit = tree_commit(path)
    want = (documented or {}).get(name)
    if want and commit != want:
        raise UsageError(f"{option} {name}={where}: the tree is at {commit or 'an unknown commit'}, not {name} "
                         f"({want}); give the tree of that commit")
    if documented is not None and not want and commit and not commit.startswith(name):
        raise UsageError(f"{option} {name}={where}: the tree is at {commit}, which {name!r} does not name")
    return Tree(name, path, commit)


# ---------------------------------------------------------------------------
# suites


@dataclass(frozen=True)
class Suite:
    """One row: a pytest run over ``files`` with ``env`` (Python names are resolved to built Pythons)."""

    name: str
    judged: str
    pythons: tuple[str, ...]  # the framework Pythons it uses (first: the one the transformers column names)
    files: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    missing: str | None = None  # why it cannot run here (no tree given)


# the trees whose files train/profiles/mlperf.py cites (docs/CONFORMANCE.md, PROFILE=mlperf)
MLPERF_TREES = {"--mlcommons-training": "TPRIMAT_MLCOMMONS_TRAINING",
                "--mlcommons-policies": "TPRIMAT_MLCOMMONS_POLICIES", "--nemo-tree": "TPRIMAT_NEMO_TREE"}


def suites(megatron: list[Tree], primus: Tree | None, python: dict[str, str],
           mlperf: dict[str, Path] | None = None) -> list[Suite]:
    """Every conformance suite, in the order they run (the cheap ones first).

    ``mlperf``: the cited trees by option (``MLPERF_TREES``); the mlperf row needs all three."""
    conf = "tests/conformance/"
    lines = {tree.name: tree for tree in megatron}
    ref = lines.get(MEGATRON_REF_LINE) or (megatron[0] if megatron else None)
    legacy = lines.get(LEGACY_LINE)
    amd, nemo = python["megatron-amd"], python["nemo"]
    # The dataset row's compile_helpers test needs a tree's megatron/core/datasets/Makefile (the wheels carry none).
    found = [Suite("dataset (images' transformers)", "megatron-core 0.12.0 and 0.15.0 wheels, side environments "
                   "of side-amd.txt and side-nvd.txt", (), ("tests/unit/train/rules/test_dataset_conformance.py",
                                                             "tests/unit/train/rules/test_sample_order.py",
                                                             "tests/unit/data/test_sample_tokenizers_slow.py"),
                   {"TPRIMAT_MEGATRON_LM": str(ref.path)} if ref else {})]
    for tree in megatron:
        found.append(Suite(f"mega @ {tree.name}", f"Megatron-LM {_short(tree.commit)}", ("megatron-amd",),
                           (conf + "test_conformance_megatron.py",),
                           {"TPRIMAT_MEGATRON_PYTHON": amd, "TPRIMAT_MEGATRON_LM": str(tree.path)}))
    if not megatron:
        found.append(Suite(f"mega @ {MEGATRON_REF_LINE}", "Megatron-LM", ("megatron-amd",),
                           (conf + "test_conformance_megatron.py",), missing="no --megatron tree given"))
    prim_env = {"TPRIMAT_MEGATRON_PYTHON": amd, "TPRIMAT_PRIMUS": str(primus.path)} if primus else {}
    found.append(Suite(f"prim @ {primus.name if primus else 'v0.5.0'}",
                       f"Primus {_short(primus.commit) if primus else ''} + its Megatron-LM", ("megatron-amd",),
                       (conf + "test_conformance_primus.py",), prim_env,
                       None if primus else "no --primus tree given"))
    found.append(Suite("nemo @ 2.3.0", "nemo-toolkit 2.3.0, megatron-core 0.12.0", ("nemo",),
                       (conf + "test_conformance_nemo.py", "tests/unit/train/frameworks/test_nemo_real.py"),
                       {"TPRIMAT_NEMO_PYTHON": nemo}))
    profile_env = {"TPRIMAT_MEGATRON_PYTHON": amd, "TPRIMAT_NEMO_PYTHON": nemo}
    if ref:
        profile_env["TPRIMAT_MEGATRON_LM"] = str(ref.path)
    profile_env.update(prim_env)
    found.append(Suite("tuned profiles", "the three stacks above, PROFILE=tuned", ("megatron-amd", "nemo"),
                       (conf + "test_conformance_profiles.py",), profile_env,
                       None if ref and primus else "needs a --megatron and the --primus tree"))
    cited = {MLPERF_TREES[option]: str(path) for option, path in (mlperf or {}).items()}
    lacking = [option for option in MLPERF_TREES if MLPERF_TREES[option] not in cited]
    found.append(Suite("mlperf profile", "PROFILE=mlperf: its cited lines, and every vendor job's dry run",
                       ("megatron-amd", "nemo"), (conf + "test_conformance_mlperf.py",), {**profile_env, **cited},
                       None if ref and primus and not lacking else
                       "needs a --megatron and the --primus tree, " + ", ".join(MLPERF_TREES)))
    for pins, python_name in (("amd", "megatron-amd"), ("nvd", "megatron-nvd")):
        env = {"TPRIMAT_MEGATRON_PYTHON": python[python_name]}
        if ref:
            env["TPRIMAT_MEGATRON_LM"] = str(ref.path)
        if legacy:
            env["TPRIMAT_MEGATRON_LM_LEGACY"] = str(legacy.path)
        judged = " + ".join(f"Megatron-LM {_short(t.commit)}" for t in (ref, legacy) if t)
        found.append(Suite(f"preprocess_data ({pins} pins)", judged or "Megatron-LM", (python_name,),
                           (conf + "test_conformance_preprocess_data.py",), env,
                           None if ref and legacy else f"needs --megatron {MEGATRON_REF_LINE}=... and "
                           f"{LEGACY_LINE}=..."))
    return found


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(commit unknown)"


@dataclass
class Row:
    suite: str
    judged: str
    python: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    status: str = "ran"  # ran | missing (no tree) | broken (pytest did not report)
    note: str = ""
    failures: list[str] = field(default_factory=list)


def junit_counts(path: Path) -> tuple[int, int, int, list[str]]:
    """(passed, failed, skipped, "test id: first line of why" per failure) from pytest's junit XML."""
    root = ElementTree.parse(path).getroot()
    cases = root.iter("testcase")
    passed = failed = skipped = 0
    failures = []
    for case in cases:
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            failed += 1
            child = next(c for c in case if c.tag in ("failure", "error"))
            why = (child.get("message") or child.text or "").strip().splitlines()
            failures.append(f"{case.get('classname')}::{case.get('name')}: {why[0][:300] if why else child.tag}")
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped, failures


def hermetic_env() -> dict[str, str]:
    """The suite's cache folders (shell/test.sh --env): this checkout's .cache/, as the CI suite uses."""
    out = subprocess.run([str(REPO / "shell" / "test.sh"), "--env"], capture_output=True, text=True, check=False)
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def run_suite(suite: Suite, python: dict[str, Path], out_dir: Path, select: str | None, timeout: int) -> Row:
    first = suite.pythons[0] if suite.pythons else None
    column = "the .venv"
    if first:
        version = package_version(python[first], "transformers")
        column = f"{first} (transformers {version})"
    else:
        column = "side envs (transformers 4.57.1, 4.51.3)"
    row = Row(suite.name, suite.judged, column)
    if suite.missing:
        row.status, row.note = "missing", suite.missing
        return row
    slug = "".join(c if c.isalnum() else "-" for c in suite.name).strip("-")
    xml, log = out_dir / f"{slug}.xml", out_dir / f"{slug}.log"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rfEs",
               f"--junitxml={xml}", *suite.files]
    if select:
        command += ["-k", select]
    env = {**os.environ, **hermetic_env(), **suite.env}
    # The side Pythons keep the bytecode their probes compile, as the suite's do (shell/test.sh).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(f'{k}={v}' for k, v in suite.env.items())} {' '.join(command)}\n")
        out.flush()
        try:
            subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                           check=False)
        except subprocess.TimeoutExpired:
            row.note = f"stopped after {timeout} s"
    row.seconds = time.monotonic() - started
    if not xml.is_file():
        row.status, row.failed = "broken", 1
        row.failures = [f"pytest wrote no junit XML (log: {log})"]
        return row
    row.passed, row.failed, row.skipped, row.failures = junit_counts(xml)
    if select:
        row.note = (row.note + "; " if row.note else "") + f"-k {select!r}"
    return row


# ---------------------------------------------------------------------------
# the table


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def table(rows: list[Row], header: str) -> str:
    """The rows as a Markdown table (printed and recorded alike), each failure listed below it."""
    lines = [header, "", "| suite | code judged | Python | passed | failed | skipped | time | note |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for row in rows:
        counts = ("-", "-", "-") if row.status == "missing" else (row.passed, row.failed, row.skipped)
        lines.append(f"| {row.suite} | {row.judged} | {row.python} | {counts[0]} | {counts[1]} | {counts[2]} | "
                     f"{_minutes(row.seconds)} | {row.note or row.status if row.status != 'ran' else row.note} |")
    totals = [sum(getattr(r, key) for r in rows) for key in ("passed", "failed", "skipped")]
    lines.append(f"| total | | | {totals[0]} | {totals[1]} | {totals[2]} | "
                 f"{_minutes(sum(r.seconds for r in rows))} | |")
    failing = [f"* {row.suite}: {why}" for row in rows for why in row.failures]
    if failing:
        lines += ["", "Failures:", *failing]
    return "\n".join(lines) + "\n"


def repo_state() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return f"{commit}{' + uncommitted changes' if dirty else ''}"


def record(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` atomically (the whole file is rewritten through a temporary sibling)."""
    from utils.io.atomic import atomic_write_text

    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    atomic_write_text(path, before.rstrip("\n") + ("\n\n" if before else "") + text)


# ---------------------------------------------------------------------------
# CLI


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.run",
        description="Build the framework Pythons from tests/conformance/constraints/ (once per change of those "
        "files) and run every conformance suite against the given upstream trees, one after another; print one "
        "table of passed/failed/skipped per suite. Exit 0 only when no suite failed (and none lacked its tree, "
        "unless --allow-missing); 2 on a bad argument.")
    parser.add_argument("--megatron", action="append", default=[], metavar="NAME=PATH",
                        help="a Megatron-LM tree and its line (repeat): " + ", ".join(DOCUMENTED_LINES)
                        + f"; {MEGATRON_REF_LINE} is MEGATRON_REF's, {LEGACY_LINE} preprocess_data's legacy line")
    parser.add_argument("--primus", metavar="NAME=PATH", help="the Primus tree (v0.5.0=PATH), its "
                        "third_party/Megatron-LM the 847781764f tree")
    for option, variable in MLPERF_TREES.items():
        parser.add_argument(option, type=Path, metavar="PATH", help=f"the mlperf row's tree ({variable}; "
                            "docs/CONFORMANCE.md, PROFILE=mlperf)")
    parser.add_argument("--envs", type=Path, default=REPO / ".side" / "conformance" / "pythons",
                        help="where the framework Pythons are built (default: %(default)s, git-ignored)")
    parser.add_argument("--python", default=getattr(sys, "_base_executable", sys.executable),
                        help="the base interpreter of the framework Pythons (default: %(default)s)")
    parser.add_argument("--suite", action="append", default=[], metavar="TEXT",
                        help="run only suites whose name contains TEXT (repeat); default: all")
    parser.add_argument("--select", metavar="EXPR", help="pytest -k expression for every suite (a quick subset)")
    parser.add_argument("--out", type=Path, help="junit XML and logs (default: .side/conformance/runs/<time>)")
    parser.add_argument("--timeout", type=int, default=4 * 3600, help="seconds per suite (default: %(default)s)")
    parser.add_argument("--record", type=Path, metavar="FILE", help="append the dated table to FILE")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the rows as JSON")
    parser.add_argument("--allow-missing", action="store_true", help="a suite without its tree does not fail")
    parser.add_argument("--build-only", action="store_true", help="build the Pythons, run no suite")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        megatron = [parse_tree(text, "--megatron", DOCUMENTED_LINES) for text in args.megatron]
        primus = parse_tree(args.primus, "--primus", None) if args.primus else None
        if primus and not (primus.path / "primus").is_dir():
            raise UsageError(f"--primus {args.primus}: no primus/ package in {primus.path}")
        if primus:
            sub = tree_commit(primus.path / "third_party" / "Megatron-LM")
            if sub != DOCUMENTED_LINES[MEGATRON_REF_LINE]:
                raise UsageError(f"--primus {args.primus}: third_party/Megatron-LM is at {sub or 'an unknown commit'}, "
                                 f"not Primus v0.5.0's {DOCUMENTED_LINES[MEGATRON_REF_LINE]}")
        mlperf = {option: getattr(args, option[2:].replace("-", "_")).resolve() for option in MLPERF_TREES
                  if getattr(args, option[2:].replace("-", "_"))}
        for option, path in mlperf.items():
            if not path.is_dir():
                raise UsageError(f"{option} {path}: no such folder")
        if args.timeout < 1:
            raise UsageError(f"--timeout {args.timeout}: must be at least 1")
    except UsageError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = (args.out or REPO / ".side" / "conformance" / "runs" / stamp).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    python: dict[str, Path] = {}
    for spec in PYTHONS.values():
        print(f"conformance: Python {spec.name} ...", file=sys.stderr, flush=True)
        try:
            python[spec.name], note = build_python(spec, args.envs.resolve(), args.python, out_dir)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"conformance: cannot build the {spec.name} Python: {exc}", file=sys.stderr)
            return 1
        changed = drift(spec, python[spec.name])
        print(f"conformance: {note}" + (f"; differs from {spec.constraints}: {', '.join(changed)}" if changed
                                         else ""), file=sys.stderr, flush=True)
    if args.build_only:
        return 0
    chosen = [s for s in suites(megatron, primus, {k: str(v) for k, v in python.items()}, mlperf)
              if not args.suite or any(text in s.name for text in args.suite)]
    rows = []
    for suite in chosen:
        print(f"conformance: {suite.name} ...", file=sys.stderr, flush=True)
        rows.append(run_suite(suite, python, out_dir, args.select, args.timeout))
        last = rows[-1]
        print(f"conformance: {suite.name}: {last.passed} passed, {last.failed} failed, {last.skipped} skipped "
              f"({_minutes(last.seconds)}) {last.note}", file=sys.stderr, flush=True)
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    header = (f"tprimat conformance, {when}, commit {repo_state()}, Python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs (logs: {out_dir})")
    text = table(rows, header)
    print(text)
    command = "python -m tests.conformance.run " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.record:
        record(args.record, text + f"\nCommand: `{command}`\n")
    if args.json:
        from utils.io.atomic import atomic_write_text

        atomic_write_text(args.json, json.dumps({"header": header, "command": command,
                                                 "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    missing = [r for r in rows if r.status == "missing"]
    if any(r.failed for r in rows) or (missing and not args.allow_missing):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
