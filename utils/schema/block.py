"""What every block of a result is: strict keys, bounded finite figures, and no null without its reason.

Results are read from other people's machines, so no NaN or infinity, unknown keys refused, figures bounded.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

Scalar = str | int | float | bool | None

# Upper bounds of every figure: a result is foreign input, and a figure of 10**300 would overflow the statistics that
# read it. No measured quantity comes near these (1e18 is beyond any throughput, FLOP count per token or energy in J).
MAX_INT = 2**63 - 1
MAX_FIGURE = 1e18
NonNegative = Annotated[float, Field(ge=0, le=MAX_FIGURE)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
Positive = Annotated[int, Field(ge=1, le=MAX_INT)]
Figure = Annotated[float, Field(ge=-MAX_FIGURE, le=MAX_FIGURE)]


class Block(BaseModel):
    """Base of every block: strict keys, no non-finite numbers, assignment re-validated, no null without its reason.

    ``NULL_REASONS`` is the one owner of "what cannot be measured is null with a reason": a figure (or a tuple of
    figures, null when all of them are; ``"*"``: every other field) -> the field that says why it is null, a text
    (one reason for them all) or a mapping (a reason per figure's name).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)
    NULL_REASONS: ClassVar[dict[str | tuple[str, ...], str]] = {}

    @model_validator(mode="after")
    def _null_has_reason(self) -> Block:
        for figures, where in self.NULL_REASONS.items():
            names = tuple(n for n in type(self).model_fields if n != where) if figures == "*" else (
                (figures,) if isinstance(figures, str) else figures)
            why = getattr(self, where)
            if isinstance(why, dict):
                missing = [n for n in names if getattr(self, n) is None and n not in why]
            else:
                missing = [] if why or any(getattr(self, n) is not None for n in names) else list(names)
            if missing:
                raise ValueError(f"{type(self).__name__}: {', '.join(missing)} null without a reason in '{where}'")
        return self
