"""The order in which pytest-xdist hands test files to its workers: the slowest files first.

Why: ``shell/test.sh`` runs three workers with ``--dist loadfile`` (a file stays on one worker, so its module
fixtures are built once). xdist's own order is by test count, largest first, so the files that start real jobs
and probes with few tests (``test_history_train.py``: 1 test, 85 s; ``test_tran_fsdp.py``: 3 tests, 120-150 s)
came last, and the suite ended with one worker still busy while the others had nothing left: an idle tail bounded
by the largest of them (docs/PERFORMANCE.md, "The test suite"). Handing the slowest files out first (the longest-
processing-time-first rule) leaves the many quick files to fill the workers' ends evenly.

``shell/test.sh`` passes ``--no-loadscope-reorder`` so that xdist keeps the order this module gives the items
(``tests/conftest.py: pytest_collection_modifyitems``, in the workers only: a single-process run keeps pytest's
own order). The order changes no test's outcome, only when a worker starts it; a file missing from the list runs
after the listed ones, in xdist's own order (most tests first). ``tests/house/test_suite_order.py`` holds the list
to files that exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

# Heaviest first: worker seconds per file (calls and set-ups) in the whole-suite runs of fbf5242 and 6a30842 on
# the 2-core VM, three workers (the 60 slowest test durations of each; docs/PERFORMANCE.md, "The test suite").
# Files of about 25 s and more; an order, not a budget, so rough figures suffice. The files marked "alone" came
# later: their calls' seconds each file alone, niced, on the 2-core VM at load 3-8 (2026-12-07), set-ups aside
# (the sample data is built once per suite); a file of one or a few tests is the one xdist would leave last.
SLOWEST_FILES: tuple[str, ...] = (
    "tests/unit/train/frameworks/test_deep.py",  # 250-280 s: the 2-rank ZeRO-2 comparison, ZeRO-3
    "tests/unit/train/rules/test_dataset_conformance.py",  # 200-210 s: three stacks' probe interpreters
    "tests/unit/train/frameworks/test_tran.py",  # 180-190 s
    "tests/unit/train/frameworks/test_tran_fsdp.py",  # 120-150 s: torch.compile on cpu
    "tests/e2e/test_probe_results_kept.py",  # 120-130 s
    "tests/e2e/test_shell_train.py",  # 100-120 s
    "tests/e2e/test_time_to_quality.py",  # 80-95 s
    "tests/e2e/test_slurm_cluster.py",  # 80 s of CPU: three two-node jobs on a real Slurm
    "tests/unit/evaluate/history/test_history_train.py",  # 85 s, one test
    "tests/e2e/test_job_tree_signals.py",  # 75-80 s
    "tests/e2e/test_multinode.py",  # 60-80 s
    "tests/golden/test_goldens.py",  # alone: 20-57 s, one test (every golden output produced)
    "tests/e2e/test_probe_signals.py",  # alone: 45 s (an in-process tiny run, two train.sh under a signal)
    "tests/unit/evaluate/history/test_history_shell.py",  # 45-60 s
    "tests/unit/data/test_sample_tokenizers_slow.py",  # 55 s
    "tests/unit/train/launch/test_profile_launchers.py",  # 55 s
    "tests/unit/train/frameworks/test_tran_mlperf.py",  # 50 s, one test
    "tests/unit/train/rules/test_sample_order.py",  # 40-50 s
    "tests/unit/evaluate/test_compare.py",  # 45 s
    "tests/e2e/test_untrusted_signals.py",  # 35-45 s
    "tests/e2e/test_shell_purge_wrap.py",  # 40-45 s
    "tests/e2e/test_probe_platforms.py",  # alone: 34 s, six tests
    "tests/unit/data/test_data_encode_atomic.py",  # 40 s
    "tests/unit/bench/test_bench_load.py",  # 30-40 s, one test
    "tests/unit/train/logs/test_log_analysis_bad_input.py",  # 30-45 s
    "tests/unit/bench/test_bench_monitor_overhead.py",  # 35 s
    "tests/unit/train/frameworks/test_tran_init.py",  # 35 s
    "tests/unit/bench/test_bench_eval_overhead.py",  # 30 s
    "tests/unit/data/test_data_ready.py",  # 30 s
    "tests/unit/train/frameworks/test_worker_exit.py",  # 30 s
)


def file_of(nodeid: str) -> str:
    """The test file of a pytest node id (``path.py::test[param]``): xdist's ``loadfile`` scope."""
    return nodeid.split("::", 1)[0]


def slowest_first(nodeids: Sequence[str]) -> list[int]:
    """The positions of ``nodeids`` in the order to run them: the listed files first, heaviest first, then the
    others by their number of tests, largest first (xdist's own order); a file's tests keep their order."""
    count = Counter(file_of(nodeid) for nodeid in nodeids)
    rank = {path: index for index, path in enumerate(SLOWEST_FILES)}
    first_seen: dict[str, int] = {}
    for nodeid in nodeids:
        first_seen.setdefault(file_of(nodeid), len(first_seen))

    def key(position: int) -> tuple[int, int, int, int]:
        path = file_of(nodeids[position])
        return (rank.get(path, len(rank)), -count[path], first_seen[path], position)

    return sorted(range(len(nodeids)), key=key)
