"""``tran``: the vendor-neutral reference trainer (plugin, torchrun worker, model step, Megatron-order data)."""
