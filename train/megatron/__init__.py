"""Megatron-LM pieces shared by ``mega`` and ``prim``: settings, trees, inputs, log result, probe, record.

Imports nothing: the probe runs in the framework's Python.
"""
