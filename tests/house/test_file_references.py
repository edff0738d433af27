"""No document, comment or docstring names a file the repository does not hold (issue 47).

Every Markdown file of the tree is read whole; every code file (Python, shell, Dockerfiles, the env and
requirement files) by its comments and docstrings, where its prose is. A reference is a path from a top-level
folder, a ``python -m`` module of the project, a documentation file named in capitals, a folder of project notes
outside the repository, or a section of a design document that is not in it (tests/helpers/references.py says
exactly what counts). The recorded outputs of tests/golden/out/ and the data files of tests/fixtures/ are left out:
they record what ran, not what the tree holds.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.references import Tree, comments_and_docstrings, missing_references, prose_files


def test_no_doc_or_comment_names_a_missing_file() -> None:
    tree = Tree.of()
    found = {path: missing for path, text in prose_files(tree) if (missing := missing_references(text, tree))}
    assert found == {}, "references to files the repository lacks (fix the reference, or name what the repo has):\n" \
        + "\n".join(f"  {path}: {', '.join(missing)}" for path, missing in sorted(found.items()))


def test_the_check_reads_docs_comments_and_docstrings_and_sees_each_kind(tmp_path: Path) -> None:
    for path in ("utils/io/atomic.py", "docs/RUNNING.md", "evaluate/history/__main__.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    tree = Tree.of(tmp_path)
    design = "DESIGN" + " section 3"  # spelled apart, or this very file would be a finding
    text = (f"utils/io/atomic.py, utils/io/atomic.atomic_path, utils/old.py, python -m evaluate.history, "
            f"python -m evaluate.nothing, RUNNING.md, NOTES.md, /work/{'shared'}/X.md, ({design}), "
            "pytorch/torchtitan:tests/assets/losses, train/train_<platform>_x.sh")
    assert missing_references(text, tree) == sorted([
        "utils/old.py", "python -m evaluate.nothing", "NOTES.md", f"/work/{'shared'}/X.md (outside the repository)",
        f"{design} (a design document outside the repository)"])
    code = tmp_path / "m.py"
    code.write_text('"""Module: see utils/a.py."""\nx = "utils/b.py"  # and utils/c.py\n'
                    'def f():\n    """Function: utils/d.py."""\n')
    prose = comments_and_docstrings(code)
    assert all(name in prose for name in ("utils/a.py", "utils/c.py", "utils/d.py")) and "utils/b.py" not in prose
    (tmp_path / "tests" / "golden" / "out").mkdir(parents=True)
    (tmp_path / "tests" / "golden" / "out" / "page.md").write_text("utils/gone.py")
    assert [path for path, _ in prose_files(Tree.of(tmp_path))] == [
        "docs/RUNNING.md", "evaluate/history/__main__.py", "m.py", "utils/io/atomic.py"]
