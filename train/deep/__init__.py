"""``deep``: DeepSpeed (ZeRO) over ``tran``'s model, samples and loop (plugin, torchrun worker)."""
