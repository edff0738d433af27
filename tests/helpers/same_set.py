"""The same test cases on two trees: pytest ``--deselect`` argument files for a fair suite-time comparison.

Why: a tree's suite time grows with the tests that later issues add (issue 47 was filed on 7a5dd1e, 3,529 cases
collected; 1020602 collects 3,789), so "the suite is not slower than the filing tree's" compares the cases both
trees have (docs/PERFORMANCE.md, "The test suite"). From each tree's ``pytest --collect-only -q`` output this
matches a case by its file's basename and its test name with the parameters (test basenames are unique,
tests/house/test_tree.py, so a file moved to another folder still matches) and writes, for each tree, an argument
file that deselects the cases the other tree lacks: a whole file where none of its cases is shared, else each case.
``pytest @FILE`` reads one argument a line (argparse), so an id with spaces stays one argument, and the file works
on a tree that has no copy of this module. A case whose name changed counts as not shared (its file is kept, so it
is listed as renamed or dropped), since which new case replaced it is a judgement, not a match.

``--deselect`` matches node-id prefixes, so :func:`deselections` refuses an entry that would drop a shared case too.
Build the files on the machine that runs the suites: a module that a missing tool skips at collection (Slurm,
Chromium) has no cases in its collection, so nothing here deselects it.

    (cd OLD && .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider -n 0) > old.txt
    (cd NEW && .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider -n 0) > new.txt
    (cd NEW && .venv/bin/python -m tests.helpers.same_set ../old.txt ../new.txt --filing-args ../old.args \
        --today-args ../new.args)
    cd X && ./shell/test.sh -q -p no:cacheprovider ... @../new.args    (and @../old.args in a clone of OLD)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


def collected_ids(text: str) -> list[str]:
    """The node ids of a ``pytest --collect-only -q`` output: its lines with ``::`` before the first blank line
    (the summary and the collection-time skips follow that line)."""
    ids = []
    for line in text.splitlines():
        if not line.strip():
            break
        if "::" in line:
            ids.append(line.strip())
    return ids


def file_of(nodeid: str) -> str:
    """The test file of a node id (``path.py::test[param]``)."""
    return nodeid.split("::", 1)[0]


def case_key(nodeid: str) -> tuple[str, str]:
    """What identifies a case across trees: the file's basename and everything after the first ``::``."""
    path, _, name = nodeid.partition("::")
    return os.path.basename(path), name


@dataclass(frozen=True)
class SameSet:
    """Each filing case shared with today (filing id to today's id), and the cases only one tree has."""

    shared: dict[str, str]
    filing_only: list[str]
    today_only: list[str]


def same_set(filing: Sequence[str], today: Sequence[str]) -> SameSet:
    """Pair the two collections by :func:`case_key`; raises on a key two cases of one tree share."""
    for tree, ids in (("filing", filing), ("today", today)):
        keys = [case_key(nodeid) for nodeid in ids]
        if len(set(keys)) != len(keys):
            raise ValueError(f"the {tree} collection has two cases with one basename and name")
    today_by_key = {case_key(nodeid): nodeid for nodeid in today}
    shared = {nodeid: today_by_key[case_key(nodeid)] for nodeid in filing if case_key(nodeid) in today_by_key}
    kept_today = set(shared.values())
    return SameSet(shared=shared, filing_only=[nodeid for nodeid in filing if nodeid not in shared],
                   today_only=[nodeid for nodeid in today if nodeid not in kept_today])


def deselections(collected: Sequence[str], kept: Iterable[str]) -> list[str]:
    """What to pass to ``--deselect`` so that of ``collected`` only ``kept`` runs: a file none of whose cases is
    kept as one entry, else each case not kept. Raises where an entry is a prefix of a kept case."""
    kept = set(kept)
    files_kept = {file_of(nodeid) for nodeid in kept}
    entries = list(dict.fromkeys(nodeid if file_of(nodeid) in files_kept else file_of(nodeid)
                                 for nodeid in collected if nodeid not in kept))
    clashes = sorted(f"{entry} -> {nodeid}" for entry in entries for nodeid in kept if nodeid.startswith(entry))
    if clashes:
        raise ValueError(f"--deselect matches prefixes: these would drop shared cases: {clashes}")
    return entries


def args_text(entries: Sequence[str]) -> str:
    """An argument file for ``pytest @FILE``: one ``--deselect=`` a line."""
    return "".join(f"--deselect={entry}\n" for entry in entries)


def summary(pairs: SameSet, filing: Sequence[str], today: Sequence[str]) -> list[str]:
    """The figures a PERFORMANCE.md row cites: shared, moved, and the cases only one tree has."""
    moved = sum(1 for old, new in pairs.shared.items() if old != new)
    today_files = {os.path.basename(file_of(nodeid)) for nodeid in today}
    gone_with_file = [nodeid for nodeid in pairs.filing_only if os.path.basename(file_of(nodeid)) not in today_files]
    return [f"filing tree: {len(filing)} cases; today: {len(today)}",
            f"shared: {len(pairs.shared)} (of which {moved} in a moved file)",
            f"filing cases not shared: {len(pairs.filing_only)}: {len(gone_with_file)} dropped with their file, "
            f"{len(pairs.filing_only) - len(gone_with_file)} renamed or dropped in a file both trees have",
            f"today's cases the filing tree lacks: {len(pairs.today_only)}"]


def main(argv: Sequence[str] | None = None) -> int:
    """Read two collections, print the figures and the cases not shared, write both argument files."""
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.same_set", description=__doc__.split("\n\n")[0])
    parser.add_argument("filing_collect", type=Path, help="`pytest --collect-only -q` output of the older tree")
    parser.add_argument("today_collect", type=Path, help="the same of the tree to compare with it")
    parser.add_argument("--filing-args", type=Path, required=True, help="argument file written for the older tree")
    parser.add_argument("--today-args", type=Path, required=True, help="argument file written for the other tree")
    args = parser.parse_args(argv)
    filing = collected_ids(args.filing_collect.read_text(encoding="utf-8"))
    today = collected_ids(args.today_collect.read_text(encoding="utf-8"))
    pairs = same_set(filing, today)
    args.filing_args.write_text(args_text(deselections(filing, pairs.shared)), encoding="utf-8")
    args.today_args.write_text(args_text(deselections(today, pairs.shared.values())), encoding="utf-8")
    print("\n".join(summary(pairs, filing, today)))
    print("\n".join(f"  not shared: {nodeid}" for nodeid in pairs.filing_only))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
