"""The tiny offline workload every training test runs, and the environment that points it at test folders.

Small enough for 2 CPU cores, yet it exercises warm-up, gradient accumulation and the LR schedule.
``tests/conftest.py`` builds its sample data once per session (``sample_data_dir``) and hands tests
the environment through the ``tiny_env`` fixture; tests that start their own processes call
:func:`tiny_environ` directly.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.paths import REPO
from tests.helpers.proc import free_port

TINY_WORKLOAD = {
    "PLATFORM": "cpu",
    "DATASET": "sample",
    "MODEL_SIZE": "tiny",
    "MODELS": "llama qwen mistral",
    "FRAMEWORK": "tran",
    "SAMPLE_MB": "0.5",
    "SAMPLE_VOCAB": "2048",
    "TRAIN_ITERS": "12",
    "WARMUP_STEPS": "2",
    "SL": "64",
    "MBS": "2",
    "GA": "2",
    "TP": "1",
    "PP": "1",
    "CP": "1",
    "DP": "1",
    "NNODES": "1",
    "NODE_RANK": "0",
    "GPUS_PER_NODE": "1",
    "MEASURE_SKIP_STEPS": "",
    "LR": "3e-3",
    "MIN_LR": "3e-4",
    "RUNS": "1",
    "PROFILING": "false",
}


def tiny_environ(data_dir: Path, output_dir: Path, **overrides: str) -> dict[str, str]:
    """os.environ plus the tiny workload, pointed at test directories (never the repo's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN",)}
    env.update(TINY_WORKLOAD)
    env.update(
        TPRIMAT_CONFIG=str(REPO / "config.env"),
        DATA_DIR=str(data_dir),
        OUTPUT_DIR=str(output_dir),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        HISTORY_DB=str(output_dir.parent / "history.sqlite"),  # the results database, never the repository's
    )
    env.update(overrides)
    return env
