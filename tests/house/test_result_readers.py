"""Every reader of result files reads through the one gate, ``utils/result/admit.py`` (issue 49).

A check kept by one reader was bypassed by the next (compare refused a forged run that ``history add`` stored as a
baseline). Here every Python file outside tests/ is parsed with ``ast`` and each way of reading a result is listed:
a use of the strict reader ``read_result`` (or its long way), a ``Result.model_validate``/``model_validate_json``, and
JSON loading (``json.load(s)``, ``parse_json``, ``read_json_text``, ``load_json``) in a module that names result
files (imports ``RESULT_GLOB``, ``find_result_files`` or ``result_path``, or holds a ``train_*`` pattern). Each must
be in :data:`ALLOWED`, with the reason it is no reader of foreign results; anything else is a bypass.
"""

from __future__ import annotations

import ast
import subprocess

from tests.helpers.paths import REPO

OWNER = "utils/result/admit.py"
# module -> why its reads need not (or cannot) go through the gate
ALLOWED = {
    OWNER: "the gate itself",
    "utils/result/file.py": "defines the strict reader; status_of and `check` say what the schema alone says",
    "utils/result/step_log.py": "its own run's step record, rebuilt into that run's result",
    "utils/files/run_owner.py": "its own job's placeholder result, rewritten by the job's owner",
    "train/launch/job_result.py": "its own run's result, read back to finish it",
    "evaluate/mlperf/result.py": "builds a result from an MLLOG; the import checks it with admit.refusals",
    "bench/history_bench.py": "results the bench itself made or trained, measured as stored",
}
READERS = {"read_result", "read_the_long_way"}
VALIDATORS = {"model_validate", "model_validate_json"}
JSON_LOADS = {"load", "loads", "parse_json", "read_json_text", "load_json"}
RESULT_NAMES = {"RESULT_GLOB", "find_result_files", "result_path"}


def _name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def reads(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for every way ``source`` reads a result."""
    tree = ast.parse(source)
    names_results = any((isinstance(n, ast.ImportFrom) and any(a.name in RESULT_NAMES for a in n.names))
                        or (isinstance(n, ast.Constant) and isinstance(n.value, str) and "train_*" in n.value)
                        for n in ast.walk(tree))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name in READERS]
        elif isinstance(node, ast.Call):
            called = _name(node.func)
            owner = _name(node.func.value) if isinstance(node.func, ast.Attribute) else ""
            if called in READERS or (called in VALIDATORS and owner == "Result"):
                found.append((node.lineno, f"calls {owner + '.' if owner else ''}{called}"))
            elif called in JSON_LOADS and names_results:
                found.append((node.lineno, f"loads JSON ({called}) beside result file names"))
    return sorted(found)


def bypasses(files: dict[str, str]) -> list[str]:
    """``path:line what`` for every read outside :data:`ALLOWED`."""
    return [f"{path}:{line} {what}" for path, source in sorted(files.items()) if path not in ALLOWED
            for line, what in reads(source)]


def _code() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=REPO,
                            capture_output=True, text=True, check=True)
    return {path: (REPO / path).read_text(encoding="utf-8") for path in listed.stdout.split()
            if not path.startswith("tests/") and (REPO / path).is_file()}


def test_every_reader_of_results_reads_through_the_gate() -> None:
    code = _code()
    assert bypasses(code) == [], f"read results through {OWNER} (admit, refusals)"
    assert [line for line, _ in reads(code[OWNER])], "the gate reads with the strict reader"
    stale = [path for path in ALLOWED if path not in code or not reads(code[path])]
    assert stale == [], "an allowed module that no longer reads results leaves the list"


def test_a_planted_bypass_is_caught() -> None:
    planted = {
        "evaluate/new_page.py": "from utils.result.file import read_result\n\ndef f(p):\n    return read_result(p)\n",
        "evaluate/quick.py": "import json\nfrom evaluate.analysis.results import find_result_files\n\n"
                             "def f(d):\n    return [json.loads(p.read_text()) for p in find_result_files(d)]\n",
        "train/peek.py": "import json\n\ndef f(d):\n    return [json.load(open(p)) for p in d.glob('train_*.json')]\n",
        "bench/typed.py": "from utils.schema.model import Result\n\n"
                          "def f(t):\n    return Result.model_validate_json(t)\n",
        "evaluate/fine.py": "from utils.result.admit import admit\n\ndef f(p):\n    return admit(p)\n",
    }
    assert bypasses(planted) == [
        "bench/typed.py:4 calls Result.model_validate_json",
        "evaluate/new_page.py:1 imports read_result",
        "evaluate/new_page.py:4 calls read_result",
        "evaluate/quick.py:5 loads JSON (loads) beside result file names",
        "train/peek.py:4 loads JSON (load) beside result file names",
    ]
