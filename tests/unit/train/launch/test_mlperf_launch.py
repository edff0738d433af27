"""A tiny PROFILE=mlperf job through the launcher (issue 35): its result carries the MLLOG's checker verdict.

The job is a stand-in (train/launch/launcher.py runs a Python one-liner) whose ``collect`` returns what a
tiny cpu ``tran`` run with evaluation leaves (steps, the ``quality`` block built by
``utils/measure/quality.py``); the preflight record is tran's own (``train/tran/plugin.py``). The launcher
writes the MLLOG beside the result with mlperf-logging's ``mllog`` and the real checker reads it: a tiny
run breaks exactly the sequence-length and target rules.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

from train.launch.context import job_context
from train.launch.contract import LaunchPlan
from train.launch.launcher import launch
from train.tran.plugin import reference_record
from utils.config.load import load_config
from utils.config.model import REPO_ROOT
from utils.machine.hardware import collect_gpu_info
from utils.measure.memory import tran_recipe
from utils.measure.quality import FIXED_SET, build_quality, make_evaluation
from utils.result.file import finalize_result, new_result, read_result, update_result
from utils.result.mllog import mllog_path
from utils.result.step_log import record_steps
from utils.schema.hardware import FrameworkVersions
from utils.schema.measures import Source
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape

TINY_MLPERF = {"PROFILE": "mlperf", "MODEL_SIZE": "tiny", "SL": "128", "MBS": "1", "DP": "1", "GA": "8",
               "GPUS_PER_NODE": "1", "TRAIN_ITERS": "4", "WARMUP_STEPS": "2", "EVAL_INTERVAL": "16",
               "EVAL_SAMPLES": "8"}


def tiny_run_result(ctx, plan, rc):
    """What the tiny run leaves: 4 steps, an evaluation after steps 2 and 4 (loss far above 3.3)."""
    shape = workload_shape(ctx.cfg, ctx.model)
    result = new_result(ctx.cfg, platform="cpu", framework="tran", model="llama", shape=shape,
                        gpu_info=collect_gpu_info("cpu"), source=Source(kind="callback"))
    record_steps(result, {"step_times": [0.5] * 4, "loss_values": [10.5, 10.4, 10.3, 10.2],
                          "learning_rates": [0.0] * 4}, skip_steps=ctx.cfg.skip_steps, shape=shape)
    evaluations = [make_evaluation(ctx.cfg, step=step, loss=loss, seconds=0.6 * step, eval_seconds=0.1)
                   for step, loss in ((2, 10.41), (4, 10.22))]
    update_result(result, quality=build_quality(ctx.cfg, evaluations, reduction="per-token mean", held_out=FIXED_SET,
                                                platform="cpu", gpus=1, run_start_unix=time.time()))
    return finalize_result(result, "ok", None)


def tran_preflight(ctx, plan):
    """tran's own record of what it runs (the real one), as the preflight stores it."""
    return (EffectiveSettings(settings=reference_record(ctx), resolved_by="train/tran/plugin.py"),
            FrameworkVersions(unknown={"torch": "test stand-in"}))


def test_a_tiny_mlperf_job_records_the_checkers_verdict_and_its_two_complaints(tmp_path):
    cfg = load_config(environ={"TPRIMAT_CONFIG": str(REPO_ROOT / "config.env"), "OUTPUT_DIR": str(tmp_path),
                               **TINY_MLPERF})
    ctx = job_context(cfg, "cpu", "tran", "llama")
    stand_in = SimpleNamespace(
        plan=lambda ctx: LaunchPlan(argv=[sys.executable, "-c", "pass"], env={}, files={}, reads_dataset=False),
        collect=tiny_run_result, preflight=tran_preflight,
        memory=lambda ctx, plan: tran_recipe("fsdp2", ctx.cfg.world_size))
    assert launch(ctx, stand_in) == 0
    result = read_result(ctx.result_path)
    assert ctx.result_path.name == "train_cpu_tran_llama_mlperf.json" and result.profile == "mlperf"
    block = result.mlperf
    assert block.mllog == mllog_path(ctx.result_path).name and mllog_path(ctx.result_path).is_file()
    assert block.verdict == "FAILED", block
    messages = block.checks[0].messages
    assert len(messages) == 2 and messages[0].startswith("CHECK for 'max_sequence_length' failed"), messages
    assert messages[1] == "Failed checks for eval_accuracy : (v['value'] <= 3.3) and v['value'] > 0.0"
    assert result.environment.host_tunables is not None
