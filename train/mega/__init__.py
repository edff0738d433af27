"""``mega``: Megatron-LM's own ``pretrain_gpt.py`` at ``MEGATRON_REF`` (plugin)."""
