"""Helpers shared by the mega/prim/extract tests: configs pointed at tmp dirs and argv parsing."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.paths import FIXTURES
from train.launch.context import log_path_for
from train.launch.contract import RunContext
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.paths import job_data
from utils.result.file import result_path
from utils.spec.models import workload_shape

FIXTURES = FIXTURES / "logs"

# The workload the fixture logs were written for: 10 iterations, GBS 64 (1 x 8 x 8), SL 2048, 8 GPUs.
FIXTURE_WORKLOAD = {
    "TRAIN_ITERS": "10", "WARMUP_STEPS": "2", "MBS": "1", "DP": "8", "GA": "8", "TP": "1", "PP": "1", "CP": "1",
    "SL": "2048", "GPUS_PER_NODE": "8", "NNODES": "1", "NODE_RANK": "0", "MODEL_SIZE": "full", "DATASET": "bc",
    "MEASURE_SKIP_STEPS": "", "FP8": "false", "PRECISION": "bf16",
}


def make_config(tmp_path: Path, **overrides: str) -> Config:
    """The repo's config.env with the fixture workload, data and output in ``tmp_path``."""
    environ = {
        **FIXTURE_WORKLOAD,
        "DATA_DIR": str(tmp_path / "data"),
        "OUTPUT_DIR": str(tmp_path / "output"),
        "MEGATRON_PATH": "",
        "PRIMUS_PATH": "",
        **overrides,
    }
    return load_config(REPO_ROOT / "config.env", environ=environ)


def make_context(cfg: Config, platform: str, framework: str, model: str, dry_run: bool = False) -> RunContext:
    return RunContext(
        cfg=cfg, platform=platform, framework=framework, model=model, run_index=None,
        result_path=result_path(cfg.output_dir, platform, framework, model),
        log_path=log_path_for(cfg, platform, framework, model, None), data=job_data(cfg, model),
        shape=workload_shape(cfg, model),
        dry_run=dry_run,
    )


def parse_flags(argv: list[str]) -> dict[str, list[str]]:
    """``--flag v1 v2 --switch`` -> {"--flag": ["v1", "v2"], "--switch": []}; a repeated flag is an error."""
    flags: dict[str, list[str]] = {}
    current: str | None = None
    for word in argv:
        if word.startswith("--"):
            assert word not in flags, f"flag {word} given twice"
            flags[word] = []
            current = word
        else:
            assert current is not None, f"value {word!r} before any flag"
            flags[current].append(word)
    return flags
