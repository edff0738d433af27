"""MLPerf Training's published runs as tprimat results: read, scored exactly as MLPerf scores them, labelled as theirs.

``sources.py`` finds the runs, ``reader.py`` reads an MLLOG, ``run.py`` takes a run's facts, ``score.py`` scores a
system with mlperf-logging's code, ``result.py`` writes a result with a ``published`` block; ``cli.py`` the command.
"""
