"""Training logs and TensorBoard events -> the typed result: the producer of every log-based result.

``mega`` and ``prim`` cannot be measured in-process, so their numbers come from the
per-iteration lines their trainers print (formats in ``train/logs/patterns.py``); the same
code reads the logs and event files of runs tprimat did not launch. One job per module:

* :mod:`train.logs.patterns`: the line formats (regex table) and the parsing of one line;
* :mod:`train.logs.arguments`: Megatron's arguments block;
* :mod:`train.logs.scan`: the streaming scan of a whole log (:class:`~train.logs.scan.LogScan`);
* :mod:`train.logs.tensorboard`: TensorBoard event files into the same scan;
* :mod:`train.logs.workload`: the workload, model and platform a foreign log states;
* :mod:`train.logs.assemble`: from a scan to a validated :class:`utils.schema.model.Result`
  (:func:`~train.logs.assemble.build_result` for tprimat launches,
  :func:`~train.logs.assemble.build_log_result` for any other log);
* :mod:`train.logs.analyse`: which of the two a run's files get (tprimat's launch header);
* :mod:`train.logs.discover`: the runs in a folder, per-rank logs grouped.

``python -m evaluate.extract`` is the log-analysis CLI over them.
"""

from train.logs.assemble import build_result

__all__ = ["build_result"]
