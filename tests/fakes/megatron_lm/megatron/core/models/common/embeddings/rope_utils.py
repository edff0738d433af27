"""Stand-in: a fused RoPE kernel is 'available', as in the images; ``TPRIMAT_FAKE_NO_FUSED_ROPE=1`` makes it absent,
as on a host without Transformer Engine or Apex (the conformance host)."""

import os


def fused_apply_rotary_pos_emb(*args, **kwargs):
    raise RuntimeError("stand-in kernel, never called by the preflight")


if os.environ.get("TPRIMAT_FAKE_NO_FUSED_ROPE") == "1":
    fused_apply_rotary_pos_emb = None
