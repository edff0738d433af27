"""``prim``: AMD's Primus (plugin, settings probe). Imports nothing: the probe runs in Primus's Python."""
