"""Effective settings: the fairness table and what the frameworks really resolve from tprimat's configuration.

One package, one owner, run in tprimat's process: ``expected`` (the fairness table's
expected values), ``platform_env`` (the per-platform launcher environment), ``runner``
(starting a framework's probe in the framework's own Python), ``flatten`` (what every
framework's flat record shares) and ``probe_common`` (the probes' shared half, the one
module here that also runs inside the framework's Python).

The probes themselves live with their framework (``train/megatron/probe.py``,
``train/prim/probe.py``, ``train/nemo/probe.py``): they import only the standard library,
the framework and ``probe_common``, feed the framework tprimat's generated argv /
experiment / overrides, and print the raw values it resolved as one JSON line, so
tprimat's own process never imports Megatron or NeMo. This package's ``__init__``
imports nothing, so ``python -m train.<framework>.probe`` stays that light.
"""
