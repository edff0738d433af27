"""MLPerf Training's published runs as tprimat results: read, scored exactly as MLPerf scores them, labelled as theirs.

``python -m evaluate.mlperf import PATH...`` (``cli.py``): ``sources.py`` finds the runs in trees and archives,
``reader.py`` reads an MLLOG fast (mlperf-logging's parser is its oracle), ``run.py`` takes a run's facts,
``score.py`` scores a system with mlperf-logging's own code and runs its checkers on request, ``result.py`` writes
the facts as a result with a ``published`` block.
"""
