"""The same-set comparison's argument files (``tests/helpers/same_set.py``) keep exactly the cases both trees
collected, on both trees, and are refused where a ``--deselect`` prefix would drop a shared case."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.same_set import collected_ids, deselections, main, same_set

FILING = ["tests/unit/a/test_x.py::test_one", "tests/unit/a/test_x.py::test_two[p-1]",
          "tests/unit/a/test_gone.py::test_g", "tests/e2e/test_y.py::test_renamed_before"]
TODAY = ["tests/unit/b/test_x.py::test_one", "tests/unit/b/test_x.py::test_two[p-1]",
         "tests/unit/b/test_x.py::test_two[p-2]", "tests/e2e/test_y.py::test_renamed_after",
         "tests/e2e/test_new.py::test_n[a b]"]


def test_the_output_of_collect_only_is_read_to_its_first_blank_line() -> None:
    text = "\n".join(TODAY[:2]) + "\n\nSKIPPED [1] tests/helpers/required.py:21: no x::y\n2 tests collected\n"
    assert collected_ids(text) == TODAY[:2]


def test_a_moved_file_matches_by_basename_and_a_renamed_case_does_not() -> None:
    pairs = same_set(FILING, TODAY)
    assert pairs.shared == {FILING[0]: TODAY[0], FILING[1]: TODAY[1]}
    assert pairs.filing_only == FILING[2:]
    assert pairs.today_only == TODAY[2:]


def test_each_tree_deselects_what_the_other_lacks_a_file_at_once_where_none_is_shared() -> None:
    pairs = same_set(FILING, TODAY)
    assert deselections(FILING, pairs.shared) == ["tests/unit/a/test_gone.py", "tests/e2e/test_y.py"]
    assert deselections(TODAY, pairs.shared.values()) == [
        "tests/unit/b/test_x.py::test_two[p-2]", "tests/e2e/test_y.py", "tests/e2e/test_new.py"]


def test_a_deselection_that_is_the_prefix_of_a_shared_case_is_refused() -> None:
    collected = ["tests/test_z.py::test_a", "tests/test_z.py::test_a_b"]
    with pytest.raises(ValueError, match="prefixes"):
        deselections(collected, ["tests/test_z.py::test_a_b"])


def test_two_cases_with_one_key_in_a_tree_are_refused() -> None:
    with pytest.raises(ValueError, match="filing"):
        same_set(["tests/a/test_x.py::t", "tests/b/test_x.py::t"], [])


def test_the_command_writes_one_argument_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "filing.txt").write_text("\n".join(FILING) + "\n\n4 tests collected\n", encoding="utf-8")
    (tmp_path / "today.txt").write_text("\n".join(TODAY) + "\n", encoding="utf-8")
    assert main([str(tmp_path / "filing.txt"), str(tmp_path / "today.txt"),
                 "--filing-args", str(tmp_path / "f.args"), "--today-args", str(tmp_path / "t.args")]) == 0
    assert (tmp_path / "t.args").read_text(encoding="utf-8").splitlines() == [
        "--deselect=tests/unit/b/test_x.py::test_two[p-2]", "--deselect=tests/e2e/test_y.py",
        "--deselect=tests/e2e/test_new.py"]
    out = capsys.readouterr().out
    assert "shared: 2 (of which 2 in a moved file)" in out
    assert "2: 1 dropped with their file, 1 renamed or dropped" in out
