"""Training logs and TensorBoard events -> the typed result: the producer of every log-based result.

``mega`` and ``prim`` cannot be measured in-process, so their numbers come from the per-iteration lines their
trainers print; the same code reads the logs and event files of runs tprimat did not launch: line formats
(``patterns``), the arguments block (``arguments``), the streaming scan (``scan``, ``tensorboard``), a foreign
log's workload (``workload``), the validated result (``assemble``, ``analyse``), the runs in a folder
(``discover``). ``python -m evaluate.extract`` is the CLI over them.
"""

from train.logs.assemble import build_result

__all__ = ["build_result"]
