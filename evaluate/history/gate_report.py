"""The regression gate's report as a typed model: what ``python -m evaluate.gate --report FILE`` writes, the page reads.

Its own module so the page reads a report without SQLAlchemy or the gate's rules; read back strictly.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

Word = Literal["pass", "fail", "skip"]
WORDS: dict[bool | None, Word] = {True: "pass", False: "fail", None: "skip"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CheckReport(_Strict):
    """One rule's outcome (the rules: train/settings/rules.json's gate rules) and the line that says it."""

    metric: str
    result: Word
    line: str


class CandidateReport(_Strict):
    candidate: str
    run_id: int | None = None
    baseline_run_ids: list[int | None] = []
    checks: list[CheckReport] = []


class GateReport(_Strict):
    verdict: str  # pass | regression | bad input (a foreign word is shown as text, escaped)
    exit_code: int
    error: str | None = None
    candidates: list[CandidateReport] = []

    def json_text(self) -> str:
        return json.dumps(self.model_dump(), indent=1, ensure_ascii=True) + "\n"
