"""The results the report page's tests open: two platforms, two frameworks each, repeats, a hostile failed run.

Built through the real result API (``tests/helpers/evaluate.py: make_result``), never hand-typed JSON, so they
cannot drift from the typed model. The failed run carries :data:`HOSTILE` in its ``device_name`` and its
``error``: a forged result file must render as text, never run (issue 37).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.evaluate import make_result, workload_config
from train.logs.quality import HELD_OUT
from utils.measure.quality import FIXED_SET, PER_TOKEN_MEAN, build_quality, make_evaluation
from utils.schema.model import Result

HOSTILE = "<script>alert(1)</script>"
JOBS = (("nvd", "mega", 2.0), ("nvd", "tran", 2.4), ("amd", "mega", 2.2), ("amd", "prim", 1.9))
REPEATS = 2
TARGET_LOSS = 3.5
EVALUATED = {("nvd", "mega"), ("amd", "prim")}  # the first run of these two evaluated held-out loss


def evaluated(step_time: float, losses: tuple[float, ...] = (4.2, 3.4, 3.1)):  # type: ignore[no-untyped-def]
    """A ``mutate`` giving the result a quality block: evaluations every 10 steps, the target reached at the second.

    Built by utils/measure/quality.py's own ``build_quality``; the losses and times are made up for the page.
    """
    cfg = workload_config(**EVALUATION)

    def mutate(result: Result) -> None:
        evaluations = [make_evaluation(cfg, step=10 * (i + 1), loss=loss, seconds=10 * (i + 1) * step_time + i,
                                       eval_seconds=1.0) for i, loss in enumerate(losses)]
        result.quality = build_quality(cfg, evaluations, reduction=PER_TOKEN_MEAN, platform=result.platform,
                                       held_out=HELD_OUT.get(result.framework, FIXED_SET),
                                       gpus=8, energy_reason="not measured in a test")

    return mutate


def _hostile(result: Result) -> None:
    result.gpu_info.device_name = HOSTILE
    result.error = f"{HOSTILE} <img src=x onerror=alert(2)> \"quoted\" & 'single'"


# Every run evaluates on the same held-out set (compare refuses to mix evaluation settings,
# evaluate/analysis/fairness.py).
EVALUATION = {"EVAL_INTERVAL": "640", "EVAL_SAMPLES": "64", "TARGET_LOSS": str(TARGET_LOSS), "STOP_AT_TARGET": "false"}


def make_page_results(out: Path) -> Path:
    """Write the results into ``out`` and return it."""
    for index, (platform, framework, step_time) in enumerate(JOBS):
        for run in range(1, REPEATS + 1):
            losses = (4.2, 3.4, 3.1) if run == 1 and (platform, framework) in EVALUATED else (4.3, 3.9, 3.7)
            make_result(out, platform, framework, seed=10 * index + run, step_time=step_time * (1 + 0.01 * run),
                        run_index=run, mutate=evaluated(step_time, losses), **EVALUATION)

    def hostile(result: Result) -> None:  # failed at step 15: its one evaluation within the steps it ran
        evaluated(1.0, (4.3,))(result)
        _hostile(result)

    make_result(out, "nvd", "deep", seed=99, status="failed", mutate=hostile, **EVALUATION)
    return out


def labels(out: Path) -> list[str]:
    """Every run's label as the page shows it (the result file name without ``train_`` and ``.json``)."""
    return sorted(p.stem[len("train_"):] for p in out.glob("train_*.json"))
