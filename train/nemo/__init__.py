"""``nemo``: NeMo 2 recipes on NVIDIA (plugin, recipe fields, torchrun entry, Lightning callback, probe).

Imports nothing: the probe and the entry run in the NeMo image's Python.
"""
