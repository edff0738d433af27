"""Megatron-LM and Primus logs -> the typed result: the producer both log-based launchers use.

``mega`` and ``prim`` cannot be measured in-process, so their numbers come from the
per-iteration lines their trainers print (formats in shared FORMATS.md). Three
modules, one job each:

* :mod:`train.logs.patterns`: the regex table and the parsing of one line;
* :mod:`train.logs.scan`: the streaming scan of a whole log (:class:`~train.logs.scan.LogScan`);
* :mod:`train.logs.assemble`: from a scan to a validated :class:`utils.result_model.Result`
  (:func:`~train.logs.assemble.build_result`).

``python -m evaluate.extract`` is the log-analysis CLI over :func:`build_result`.
"""

from train.logs.assemble import build_result

__all__ = ["build_result"]
