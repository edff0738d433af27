"""A system package a test module needs (Chromium, Slurm): skip without it, except in CI, where that is a failure.

The suite is run by developers without every system package, and by ``.ci/run``, which installs them: there a
missing package must fail, or a green CI could hide a test that never ran. CI is ``CI=true`` (what CI's runner
sets) or the module's own ``TPRIMAT_REQUIRE_<NAME>=1`` (what ``.ci/run`` exports).
"""

from __future__ import annotations

import os

import pytest


def require(missing: str | None, flag: str) -> None:
    """Skip the calling module saying ``missing`` (why it cannot run); fail instead under CI or where ``flag`` is 1."""
    if missing is None:
        return
    if os.environ.get("CI", "").lower() == "true" or os.environ.get(flag) == "1":
        pytest.fail(f"{missing} (CI=true or {flag}=1: a required test may not skip)", pytrace=False)
    pytest.skip(missing, allow_module_level=True)
