"""What every framework's flat record shares: the precision named from the framework's own flags.

The probes report what the framework holds, in its own names (Megatron's ``args``, NeMo's
model/optimizer/DDP/data objects). Each framework maps those names onto
:func:`train.settings.expected.expected_settings`'s keys in its own package
(``train/megatron/record.py``, ``train/nemo/record.py``). Nothing is defaulted: a value the
framework did not report stays out of the record, and the preflight then names it as not resolved.
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
