"""The names tprimat's writers give their files in ``OUTPUT_DIR``: each name function and its pattern side by side.

Why one module: a writer's name and the pattern purge and wrap recognise it by are made from the same pieces, so no
writer can name a file the table does not know (``tests/e2e/test_probe_results_kept.py`` checks every writer). Also
the marker left in every output folder tprimat writes into (:func:`mark_output_dir`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from utils.io.output_path import LOCK_DIR
from utils.spec.registry import PUBLISHED_FRAMEWORK, framework_names, model_names, platform_names

STEPS_SUFFIX = ".steps.jsonl"  # the per-step record beside each result (utils/result/step_log.py)
MLLOG_SUFFIX = ".mllog"  # the MLLOG beside a PROFILE=mlperf result (utils/result/mllog.py)
TUNED = "_tuned"
MLPERF = "_mlperf"
ORIGIN_PREFIX = "_from-"  # a log-analysis result names the run it was read from (evaluate/extract.py)
# What a run's name may hold once evaluate/extract.py made it file-name safe (letters, digits, '.', '-').
ORIGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,70}[A-Za-z0-9])?")

# Fixed names: the comparison (evaluate/compare.py, evaluate/render/markdown.py), the README's snapshot
# (evaluate/probe.py), the GPU check (evaluate/gpu_check/cli.py), the history's trend (evaluate/history/cli.py),
# the page (evaluate/report_html/), the gate's report (evaluate/gate.py --report).
COMPARE_FIGURE = "compare.png"
COMPARE_REPORT = "compare.md"
PARITY_FIGURE = "loss_parity.png"
SYSTEM_SNAPSHOT = "system.json"
GPU_CHECK_STEM = "gpu_check"
HISTORY_TREND = "history_trend.png"
REPORT_PAGE = "report.html"
GATE_REPORT = "gate.json"
FIXED_OUTPUT_FILES = frozenset({COMPARE_FIGURE, COMPARE_REPORT, PARITY_FIGURE, SYSTEM_SNAPSHOT,
                                f"{GPU_CHECK_STEM}.md", f"{GPU_CHECK_STEM}.json", HISTORY_TREND, REPORT_PAGE,
                                GATE_REPORT})


def _one_of(names: list[str]) -> str:
    return "(?:" + "|".join(map(re.escape, names)) + ")"


def result_stem(platform: str, framework: str, model: str, run_index: int | None = None,
                profile: str = "identical", origin: str | None = None) -> str:
    """``train_<platform>_<framework>_<model>[_tuned|_mlperf][_r<k>][_from-<origin>]`` (the caller checks names)."""
    tuned = {"tuned": TUNED, "mlperf": MLPERF}.get(profile, "")
    suffix = f"_r{int(run_index)}" if run_index is not None else ""
    if origin is not None and not ORIGIN.fullmatch(origin):
        raise ValueError(f"a run's name in a file name must match {ORIGIN.pattern}")
    from_run = f"{ORIGIN_PREFIX}{origin}" if origin is not None else ""
    return f"train_{platform}_{framework}_{model}{tuned}{suffix}{from_run}"


def result_name(platform: str, framework: str, model: str, run_index: int | None = None,
                profile: str = "identical", origin: str | None = None) -> str:
    """The result file's name: :func:`result_stem` + ``.json``."""
    return result_stem(platform, framework, model, run_index, profile, origin) + ".json"


def frameworks_figure_name(platform: str) -> str:
    """``compare_<platform>_frameworks.png`` (evaluate/render/frameworks.py)."""
    return f"compare_{platform}_frameworks.png"


RESULT_STEM = re.compile(
    rf"train_{_one_of(platform_names())}_{_one_of([*framework_names(), PUBLISHED_FRAMEWORK])}_{_one_of(model_names())}"
    rf"(?:{TUNED}|{MLPERF})?(?:_r\d+)?(?:{re.escape(ORIGIN_PREFIX)}{ORIGIN.pattern})?")
RESULT_NAME = re.compile(rf"{RESULT_STEM.pattern}(?:\.json|{re.escape(STEPS_SUFFIX)}|{re.escape(MLLOG_SUFFIX)})")
FRAMEWORKS_FIGURE = re.compile(rf"compare_{_one_of(platform_names())}_frameworks\.png")


def is_output_file_name(name: str) -> bool:
    """Whether ``name`` is one a writer gives a file at the top of ``OUTPUT_DIR``."""
    return bool(RESULT_NAME.fullmatch(name) or FRAMEWORKS_FIGURE.fullmatch(name) or name in FIXED_OUTPUT_FILES)


# Left by tprimat in every output folder it writes into (results: utils/result/file.py; the comparison:
# evaluate/compare.py). shell/wrap.sh packs only a folder holding it (issue 26: OUTPUT_DIR=/etc packed /etc).
OUTPUT_MARKER = f"{LOCK_DIR}/output-folder"
_MARKER_TEXT = ("This folder holds files tprimat wrote (results, logs, comparisons).\n"
                "shell/wrap.sh packs only folders holding this file, and only the names utils/files/generated.py"
                " lists.\n")


def mark_output_dir(folder: Path) -> None:
    """Leave :data:`OUTPUT_MARKER` in ``folder`` (once). A folder that cannot take it only stays unpackable."""
    marker = Path(folder) / OUTPUT_MARKER
    if marker.is_file():
        return
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(_MARKER_TEXT)


def is_output_dir(folder: Path) -> bool:
    """Whether tprimat left its marker in ``folder`` (a regular file, not a link to one)."""
    try:
        return stat.S_ISREG(os.lstat(Path(folder) / OUTPUT_MARKER).st_mode)
    except OSError:
        return False


NOT_MARKED = (f"it holds no {OUTPUT_MARKER} marker, so tprimat did not write it (each folder it writes results or a "
              "comparison into has one)")  # why wrap and purge refuse such a folder
