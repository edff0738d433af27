"""The docs a newcomer reads stay short (issue 47): README.md at most 20 kB opening with the two set-up commands,
each one short line, and docs/PERFORMANCE.md a reference of current figures in at most 400 lines (the dated history
stays in git). A figure or a paragraph that does not fit replaces an older one or moves to the doc it belongs in.
"""

from __future__ import annotations

import re

from tests.helpers.paths import REPO

README = REPO / "README.md"
PERFORMANCE = REPO / "docs" / "PERFORMANCE.md"
SETUP = ("./shell/quickstart.sh", "./shell/test.sh")


def test_the_readme_is_at_most_20_kb() -> None:
    assert len(README.read_bytes()) <= 20_000, "README.md is over 20 kB: move details into the doc it links to"


def test_the_readme_opens_with_the_two_set_up_commands_on_short_lines() -> None:
    first = re.search(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first is not None, "README.md opens with a bash block"
    lines = first.group(1).splitlines()
    assert [line.split()[0] for line in lines] == list(SETUP)
    assert all(len(line) <= 60 for line in lines), f"a set-up line with a long comment: {lines}"


def test_performance_is_at_most_400_lines() -> None:
    lines = len(PERFORMANCE.read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"docs/PERFORMANCE.md has {lines} lines: keep the latest figure of each kind"
