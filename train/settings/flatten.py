"""What every framework's flat record shares: the precision named from the framework's own flags.

Nothing is defaulted: a value not reported stays out, and the preflight names it as not resolved.
"""

from __future__ import annotations

from typing import Any


def precision_of(values: dict[str, Any]) -> str:
    """bf16 | fp16 | fp32 from a framework's ``bf16``/``fp16`` switches (Megatron's args, NeMo's model config)."""
    if values.get("bf16"):
        return "bf16"
    if values.get("fp16"):
        return "fp16"
    return "fp32"
