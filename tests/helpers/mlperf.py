"""PROFILE=mlperf results as a launch leaves them, for the MLLOG and compare tests (issue 35), and the carried sample
of MLPerf's published runs (issue 48).

Built through ``tests/helpers/evaluate.py``'s ``make_result`` (the real result API) with a
``quality`` block from ``utils/measure/quality.py`` and the effective settings the preflight
records, so the MLLOG tprimat derives from them is the one a real run would get.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from evaluate.mlperf.cli import main as mlperf_main
from tests.helpers.evaluate import make_result, workload_config
from tests.helpers.paths import REPO
from train.logs.quality import HELD_OUT
from train.profiles import apply_profile
from utils.measure.quality import FIXED_SET, build_quality, make_evaluation
from utils.result.file import read_result
from utils.schema.model import Result
from utils.schema.quality import Quality
from utils.schema.run import EffectiveSettings

# The carried sample of MLPerf Training v5.1's published Llama 3.1 8B runs (tests/fixtures/mlperf/README.md)
SAMPLE = REPO / "tests" / "fixtures" / "mlperf" / "v51_sample.tar.xz"
SUMMARIZER = REPO / "tests" / "fixtures" / "mlperf" / "summarizer_v51_sample.csv"
# Its systems, by (submitter, system folder): the accelerator and the GPUs
SAMPLE_SYSTEMS = {("AMD", "MI355X_EPYC_9575F_pytorch"): ("MI355X", 8),
                  ("Supermicro", "8xMI355X_2xEPYC_9575F"): ("MI355X", 8),
                  ("Supermicro", "AS-4126GS-NBR-LCC"): ("B200", 8),
                  **{("University-of-Florida", f"hpg.dgxb200x8.n{n}"): ("B200", 8 * n) for n in (1, 2, 4, 8, 16, 32)}}

# A tiny model at SL 128 and GBS 8, evaluated every 2 steps: the run a cpu pipeline check makes.
TINY = {"PROFILE": "mlperf", "MODEL_SIZE": "tiny", "SL": "128", "MBS": "1", "DP": "8", "GA": "1",
        "TRAIN_ITERS": "4", "WARMUP_STEPS": "2", "EVAL_INTERVAL": "16", "EVAL_SAMPLES": "8"}
# The full model at the rules (SL 8192, GBS 32).
FULL = {"PROFILE": "mlperf", "TRAIN_ITERS": "8"}


def mlperf_result(out_dir: Path, losses: list[float], platform: str = "nvd", framework: str = "mega",
                  mutate: Callable[[Result], Any] | None = None, **workload: str) -> Path:
    """Write a finished result of a PROFILE=mlperf job: an evaluation every 2 steps with ``losses``, 3 s apart."""
    cfg, _ = apply_profile(workload_config(**workload), platform, framework, "llama")

    def add_quality(result: Result) -> None:
        evaluations = [make_evaluation(cfg, step=2 * (i + 1), loss=loss, seconds=3.0 * (i + 1), eval_seconds=0.5)
                       for i, loss in enumerate(losses)]
        start = datetime.fromisoformat(result.started_at or "").timestamp() + 60.0  # init took a minute
        result.quality = build_quality(cfg, evaluations, reduction="per-token mean over all evaluated tokens",
                                       held_out=HELD_OUT.get(framework, FIXED_SET),
                                       platform=platform, gpus=cfg.world_size, run_start_unix=start)
        result.effective_settings = EffectiveSettings(
            settings={"adam_eps": cfg.adam_eps, "lr_decay_iters": cfg.decay_iters}, resolved_by="the preflight")
        if mutate is not None:
            mutate(result)

    return make_result(out_dir, platform, framework, mutate=add_quality, **workload)


def summarizer_scores(path: Path) -> dict[tuple[str, str], float]:
    """``python -m mlperf_logging.result_summarizer <tree>/{*} training 5.1.0 --csv OUT``'s detailed CSV: the score of
    each system by (submitter, system folder)."""
    scores = {}
    for row in csv.DictReader(path.open()):
        system = row["details_url"].rsplit("/systems/", 1)[1][: -len(".json")]
        if row["llama31_8b:time_to_train"]:
            scores[(row["submitter"], system)] = float(row["llama31_8b:time_to_train"])
    return scores


def imported_scores(folder: Path) -> dict[tuple[str, str], float]:
    scores = {}
    for path in folder.glob("train_*.json"):
        published = json.loads(path.read_text())["published"]
        scores[(published["submitter"], published["system_id"])] = published["score_min"]
    return scores


# What a round trip through an MLLOG keeps to the millisecond only (an MLLOG holds whole milliseconds), and what it
# cannot keep: the run's own words for why it stopped (the import's are its own).
ROUND_TRIP_TIMES = ("seconds", "unix_s", "eval_seconds", "run_start_unix", "time_to_target_s", "gpu_hours_to_target")
OWN_WORDS = ("stop_reason", "null_reasons")


def _rounded(value: object, key: str = "") -> object:
    if isinstance(value, dict):
        return {k: _rounded(v, k) for k, v in value.items() if k not in (*OWN_WORDS, *ROUND_TRIP_TIMES)}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return round(value, 2) if key in ROUND_TRIP_TIMES and isinstance(value, float) else value


def assert_same_quality(ours: Quality, theirs: Quality) -> None:
    """A quality block and the one its MLLOG's import gives: equal, times to the millisecond."""
    for name in ROUND_TRIP_TIMES:  # to the millisecond (gpu-hours: that millisecond times the GPUs)
        a, b = getattr(ours, name, None), getattr(theirs, name, None)
        assert (a is None) == (b is None) and (a is None or abs(a - b) <= 2e-3), name
    for mine, read in zip(ours.evaluations, theirs.evaluations, strict=True):
        for name in ("seconds", "unix_s", "eval_seconds"):  # a run's unknown end: the MLLOG places it (t0 + seconds)
            assert getattr(mine, name) is None or abs(getattr(mine, name) - getattr(read, name)) <= 1e-3, name
    assert set(ours.null_reasons) == set(theirs.null_reasons)
    assert _rounded(ours.model_dump()) == _rounded(theirs.model_dump())


def imported_quality(mllog: Path, out: Path) -> Quality:
    """The quality block of ``python -m evaluate.mlperf import MLLOG``'s one result (the user's own run)."""
    assert mlperf_main(["import", str(mllog), "--output-dir", str(out)]) == 0
    (path,) = out.glob("train_*.json")
    result = read_result(path)
    assert result.published is None and result.source.kind == "mlperf"  # the user's own run, read back
    assert result.quality is not None
    return result.quality
