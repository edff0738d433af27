"""Every dry run, preflight record and compare/page output is what tests/golden/out/ recorded (issue 47).

A refactor keeps these byte for byte (after tests/golden/capture.py's placeholders for paths and times). A change
that means to move one records the new goldens with ``python -m tests.golden.capture --write`` and says why in its
commit; the diff of tests/golden/out/ is then the whole visible effect of the change.
"""

from __future__ import annotations

from pathlib import Path

from tests.golden.capture import check, produce


def test_every_golden_output_is_produced_unchanged(sample_data_dir: Path) -> None:
    problems = check(produce(sample_data_dir))
    assert not problems, "outputs differ from tests/golden/out/ (python -m tests.golden.capture --check):\n" + \
        "\n".join(problems[:40])
