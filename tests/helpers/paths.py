"""Where the tests find the repository, their fixtures and the framework stand-ins, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
FAKES = TESTS / "fakes"
