"""Effective settings: what Megatron-LM, Primus and NeMo really resolve from tprimat's configuration.

Two halves, kept apart on purpose:

* ``probe_*.py`` run inside the framework's own Python (the image's ``python3``, or a
  virtualenv beside an upstream tree): they import only the standard library and the
  framework, feed it tprimat's generated argv / experiment / overrides, and print the
  raw values the framework resolved as one JSON line. tprimat's own process never
  imports Megatron or NeMo.
* the other modules (``expected``, ``flatten``, ``runner``) run in tprimat's process:
  the fairness table's expected values, the translation of each framework's raw values
  into one flat record, and the subprocess call. This package's ``__init__`` imports
  nothing, so the probes can be started as ``python -m train.effective.probe_...``.
"""
