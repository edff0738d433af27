"""Context parallelism's communication type: one value on every stack, and the layouts Transformer Engine refuses.

NeMo 2.3's Mistral recipe runs ``a2a`` (``nemo/collections/llm/gpt/model/mistral.py:63``, for sliding-window
attention), Megatron-LM and Primus ``p2p`` (``megatron/training/arguments.py:2666`` at 847781764f). tprimat
removes Mistral v0.3's window, so the fairness table fixes ``p2p`` everywhere and every record reads it back:
:func:`effective_cp_comm_type` (the ``TransformerConfig``'s value; None becomes ``p2p`` in
``megatron/core/extensions/transformer_engine.py:924-925``). :func:`cp_layout_problem`: TE's all-to-all asserts
that the query and key/value heads divide by CP (``attention.py:3057-3059`` at ``bee4649c``): refused before launch.
"""

from __future__ import annotations

from typing import Any

CP_COMM_TYPE = "p2p"
A2A_TYPES = ("a2a", "a2a+p2p")


def effective_cp_comm_type(value: Any) -> str | None:
    """The communication type the attention layers run: None -> ``p2p``; one per layer -> the one, or all joined."""
    if value is None:
        return CP_COMM_TYPE
    if isinstance(value, (list, tuple)):
        kinds = [effective_cp_comm_type(one) for one in value]
        return kinds[0] if kinds and all(kind == kinds[0] for kind in kinds) else ",".join(str(k) for k in kinds)
    return str(value)


def cp_layout_problem(record: dict[str, Any]) -> str | None:
    """Why Transformer Engine cannot run a resolved record's attention under CP (None: it can)."""
    cp = record.get("context_parallel_size") or 1
    kinds = str(record.get("cp_comm_type") or "").split(",")
    if cp <= 1 or not any(kind in A2A_TYPES for kind in kinds):
        return None
    tp = record.get("tensor_model_parallel_size") or 1
    heads, groups = record.get("num_attention_heads"), record.get("num_query_groups")
    if not isinstance(heads, int) or not isinstance(groups, int):
        return None
    per_rank = (heads // tp, groups // tp)
    if per_rank[0] % cp == 0 and per_rank[1] % cp == 0:
        return None
    return (f"cp_comm_type={record.get('cp_comm_type')!r} at TP {tp} x CP {cp}: each rank holds {per_rank[0]} query "
            f"and {per_rank[1]} key/value heads, which Transformer Engine's all-to-all attention needs divisible by "
            f"CP={cp} (TransformerEngine bee4649c transformer_engine/pytorch/attention.py:3057-3059); it would stop at "
            "the first attention call; run p2p (the fairness table's) or a smaller TP")
