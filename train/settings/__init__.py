"""Effective settings: the fairness table and what the frameworks really resolve from tprimat's configuration.

Run in tprimat's process; the probes live with their framework (``train/<framework>/probe.py``), import only the
standard library, the framework and ``probe_common``, and print what the framework resolved as one JSON line, so
tprimat never imports Megatron or NeMo. This ``__init__`` imports nothing, keeping the probes light.
"""
