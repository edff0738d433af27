"""The slowest-first order of the suite's files (``tests/helpers/suite_order.py``) names files that exist, and
reorders whole files without changing the order of a file's own tests."""

from __future__ import annotations

from tests.helpers.paths import REPO
from tests.helpers.suite_order import SLOWEST_FILES, file_of, slowest_first


def test_every_listed_file_exists_once() -> None:
    assert len(set(SLOWEST_FILES)) == len(SLOWEST_FILES)
    missing = [path for path in SLOWEST_FILES if not (REPO / path).is_file()]
    assert not missing, f"renamed or removed: update tests/helpers/suite_order.py: {missing}"


def test_listed_files_come_first_then_the_rest_by_test_count() -> None:
    listed_last, listed_first = SLOWEST_FILES[1], SLOWEST_FILES[0]
    nodeids = ["tests/a.py::one", f"{listed_last}::x", "tests/b.py::one", "tests/b.py::two", f"{listed_first}::y",
               f"{listed_last}::z", "tests/a.py::three[1]"]
    ordered = [nodeids[position] for position in slowest_first(nodeids)]
    assert ordered == [f"{listed_first}::y", f"{listed_last}::x", f"{listed_last}::z", "tests/a.py::one",
                       "tests/a.py::three[1]", "tests/b.py::one", "tests/b.py::two"]
    assert sorted(ordered) == sorted(nodeids) and file_of("tests/a.py::three[1]") == "tests/a.py"


def test_the_suites_command_keeps_that_order() -> None:
    text = (REPO / "shell" / "test.sh").read_text(encoding="utf-8")
    assert "--dist loadfile --no-loadscope-reorder" in text
