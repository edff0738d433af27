"""The result's size limits as plain numbers: utils/config reads them for its bounds without importing pydantic,
which costs every config-reading process ~0.3 s of start-up (``python -X importtime -m utils.config.load``)."""

# The most steps a run may have, and so the most entries a per-step array (and the list of evaluations) may hold:
# the longest schedule tprimat runs, MLPerf's reference (train/profiles/mlperf.py MAX_STEPS). It is TRAIN_ITERS's bound,
# and what reading a result may cost in memory follows from it (utils/schema/model.py RESULT_LIMITS).
MAX_STEPS = 1_200_000
