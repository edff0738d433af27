"""MLLOG of a ``PROFILE=mlperf`` run, written with mlperf-logging's ``mllog``, and MLPerf's compliance checker on it.

Why from the result: no stack at the images' pinned versions emits MLLOG itself, so tprimat writes it for every stack
after the run, from what the run recorded (the resolved settings, the evaluations with their wall-clock times, the
start), through ``mllog``'s ``time_ms``. The keys are MLPerf's only, in the reference's order; tprimat's own facts
are prefixed ``tprimat_``, which the checker ignores. The checker is the pinned package's CLI in a child process (it
configures the root logger and keeps module state), with ruleset 6.0.0 (the verdict of record) and 6.1.0; its
messages are stored as written. For one run the package's ``rcps_llama31_8b.json`` is read for the GBS used.
"""

from __future__ import annotations

import io
import json
import logging
import math
import subprocess
import sys
import tempfile
from datetime import datetime
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from utils.io.atomic import atomic_write_text
from utils.result.names import MLLOG_SUFFIX
from utils.schema.mlperf import Mlperf, MlperfCheck, MlperfRcp
from utils.schema.model import Result

REPO_DIR = Path(__file__).resolve().parents[2]
PACKAGE = "mlperf-logging"
PINNED = "4.1.68"  # cpu-, nvd- and amd-requirements.txt
RULESET_OF_RECORD = "6.0.0"
OTHER_RULESETS = ("6.1.0",)
BENCHMARK = "llama31_8b"
SCHEDULE = "cosine with linear warmup"  # closed_llama31_8b.yaml lines 36-39 (the exact string)
SEPARATOR = "-" * 30  # the checker's separator between messages (mlp_compliance.py log_messages)
MAX_MESSAGE_CHARS = 4000
CHECK_TIMEOUT_S = 120
DERIVED_FROM = ("tprimat, after the run, from the result (training_config, effective_settings, the quality block's "
                "evaluations and times, started_at): no stack at the pinned versions emits MLLOG itself")
NOT_A_SUBMISSION = ("not an MLPerf submission: no MLCommons review, no ten-run RCP check; a verdict says whether this "
                    "run's log meets the closed-division rules")
# tprimat's precision names -> MLPerf's (common.yaml, lowest_numerical_precision_in_*)
PRECISION_NAMES = {"bf16": "bfloat16", "fp16": "fp16", "fp32": "fp32"}


class MllogError(ValueError):
    """The result cannot give an MLLOG (no quality block, no start time); one line."""


def mllog_path(result_path: Path) -> Path:
    """The MLLOG beside its result: ``train_<platform>_<framework>_<model>_mlperf.mllog``."""
    return result_path.with_suffix(MLLOG_SUFFIX)


def package_version() -> str | None:
    """The installed mlperf-logging's version, or None when it is not installed."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return None


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def _precision(result: Result) -> dict[str, str]:
    """``lowest_numerical_precision_in_{linear,attn,comm}``: FP8 reaches the linear layers only (attention in FP8 is
    off everywhere, gradients are reduced in the training dtype: train/settings/expected.py)."""
    workload = result.training_config.workload
    base = PRECISION_NAMES.get(workload.PRECISION or "", workload.PRECISION or "unknown")
    return {"linear": "fp8" if workload.FP8 else base, "attn": base, "comm": base}


def hyperparameters(result: Result) -> dict[str, Any]:
    """The MLPerf keys of what the run trained with, in the order the checker needs (warm-up before decay)."""
    w = result.training_config.workload
    resolved = result.effective_settings.settings if result.effective_settings else {}
    max_steps = resolved.get("lr_decay_iters", w.TRAIN_ITERS)
    warmup = w.WARMUP_STEPS
    quality = result.quality
    precision = _precision(result)
    return {
        "seed": w.SEED,
        "global_batch_size": w.GBS,
        "gradient_accumulation_steps": w.GA,
        "max_sequence_length": w.SL,
        "eval_samples": quality.eval_samples if quality is not None else None,
        "max_steps": max_steps,
        "opt_name": "adamw",  # decoupled weight decay on every stack (Megatron's adam, torch.optim.AdamW)
        "opt_base_learning_rate": w.LR,
        "opt_end_learning_rate": w.MIN_LR,
        "opt_adamw_beta_1": w.BETA1,
        "opt_adamw_beta_2": w.BETA2,
        "opt_adamw_epsilon": resolved.get("adam_eps"),
        "opt_adamw_weight_decay": w.WEIGHT_DECAY,
        "opt_gradient_clip_norm": w.GRAD_CLIP,
        "opt_learning_rate_warmup_steps": warmup,
        "opt_learning_rate_decay_steps": (max_steps - warmup) if max_steps is not None and warmup is not None
        else None,
        "opt_learning_rate_decay_schedule": SCHEDULE if w.LR_DECAY == "cosine" else f"{w.LR_DECAY} with linear warmup",
        "lowest_numerical_precision_in_linear": precision["linear"],
        "lowest_numerical_precision_in_attn": precision["attn"],
        "lowest_numerical_precision_in_comm": precision["comm"],
        "tensor_parallelism": w.TP,
        "pipeline_parallelism": w.PP,
        "context_parallelism": w.CP,
        "expert_parallelism": 1,  # dense models only
        "micro_batch_size": w.MBS,
        "config_filename": "config.env",
    }


def _trained_seconds(result: Result) -> float:
    """Seconds from the first training step to the run's end: its steps plus its evaluations, or the last evaluation."""
    steps = sum(t for t in result.step_times if t is not None)
    quality = result.quality
    evaluations = quality.evaluations if quality is not None else []
    total = steps + sum(e.eval_seconds or 0.0 for e in evaluations)
    return max([total, *[e.seconds for e in evaluations if e.seconds is not None]])


def mllog_text(result: Result) -> str:
    """The MLLOG lines of one run, written by ``mllog.MLLogger`` with the run's own times; :class:`MllogError`."""
    # local: mlperf-logging takes ~0.25 s to import (-X importtime) and only PROFILE=mlperf needs it
    from mlperf_logging.mllog import constants as c
    from mlperf_logging.mllog.mllog import MLLogger

    quality = result.quality
    if quality is None:
        raise MllogError("no quality block: the run evaluated nothing (EVAL_INTERVAL=0), so MLPerf has no "
                         "eval_accuracy to read")
    if result.started_at is None:
        raise MllogError("no started_at: the run's start time is unknown")
    stream = io.StringIO()
    logger = logging.getLogger(f"tprimat.mllog.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        ml = MLLogger(logger=logger, default_stack_offset=1, root_dir=str(REPO_DIR))  # "file": repository-relative
        # init: from the job's start; run: from the first training step (the quality block's origin)
        t_init = _ms(result.started_at)
        t0 = round(quality.run_start_unix * 1000) if quality.run_start_unix is not None else t_init
        t_init = min(t_init, t0)
        gbs = result.training_config.workload.GBS or 0
        ml.event(key=c.CACHE_CLEAR, value=False, time_ms=t_init)  # tprimat drops no caches: record only
        ml.start(key=c.INIT_START, time_ms=t_init)
        ml.event(key=c.SUBMISSION_BENCHMARK, value=BENCHMARK, time_ms=t_init)
        ml.event(key=c.SUBMISSION_ORG, value="tprimat (not a submission)", time_ms=t_init)
        ml.event(key=c.SUBMISSION_DIVISION, value=c.CLOSED, time_ms=t_init)
        ml.event(key=c.SUBMISSION_STATUS, value="research", time_ms=t_init)
        ml.event(key=c.SUBMISSION_PLATFORM, value=f"{result.training_config.num_gpus or '?'}x "
                 f"{result.gpu_info.device_name or result.platform} {result.framework}", time_ms=t_init)
        for key, value in hyperparameters(result).items():
            ml.event(key=key, value=value, time_ms=t_init)
        own = {"tprimat_platform": result.platform, "tprimat_framework": result.framework,
               "tprimat_model": result.model_shape.display_name if result.model_shape else result.model,
               "tprimat_train_iters": result.training_config.workload.TRAIN_ITERS,
               "tprimat_eval_interval_samples": quality.eval_interval_samples,
               "tprimat_eval_reduction": quality.reduction,
               # issue 50: whether the evaluations scored MLPerf's fixed held-out set (the same samples every time)
               "tprimat_eval_fixed_set": quality.fixed_set,
               "tprimat_eval_measure": quality.measure or "not recorded (a result written before issue 50)",
               "tprimat_times": "init_start is the job's start (started_at); run_start the first training step's "
                                "(quality.run_start_unix, else started_at); an evaluation's end its unix_s, else "
                                "run_start plus its seconds since the first training step",
               "tprimat_derived_from": DERIVED_FROM}
        for key, value in own.items():
            ml.event(key=key, value=value, time_ms=t_init)
        ml.end(key=c.INIT_STOP, time_ms=t0)
        ml.start(key=c.RUN_START, time_ms=t0)
        ml.start(key=c.BLOCK_START, metadata={c.SAMPLES_COUNT: 0}, time_ms=t0)
        evaluations = list(quality.evaluations)
        for index, ev in enumerate(evaluations):
            end = round(ev.unix_s * 1000) if ev.unix_s is not None else t0 + round(ev.seconds * 1000)
            begin = end - round((ev.eval_seconds or 0.0) * 1000)
            meta = {c.SAMPLES_COUNT: ev.samples}
            ml.end(key=c.BLOCK_STOP, metadata=meta, time_ms=begin)
            ml.start(key=c.EVAL_START, metadata=meta, time_ms=begin)
            loss = ev.loss if ev.loss is not None and math.isfinite(ev.loss) else None
            ml.event(key=c.EVAL_ACCURACY, value=loss, metadata=meta, time_ms=end)
            ml.end(key=c.EVAL_STOP, metadata=meta, time_ms=end)
            if index + 1 < len(evaluations):
                ml.start(key=c.BLOCK_START, metadata=meta, time_ms=end)
        if not evaluations:
            ml.end(key=c.BLOCK_STOP, metadata={c.SAMPLES_COUNT: 0}, time_ms=t0)
        reached = bool(quality.reached)
        stop_s = quality.time_to_target_s if reached and quality.time_to_target_s is not None \
            else _trained_seconds(result)
        stop = t0 + round(stop_s * 1000)
        ml.end(key=c.RUN_STOP, metadata={c.STATUS: c.SUCCESS if reached else c.ABORTED}, time_ms=stop)
        trained = quality.samples_to_target if reached and quality.samples_to_target is not None \
            else len(result.step_times) * gbs
        ml.event(key=c.TRAIN_SAMPLES, value=trained, time_ms=stop)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def _messages(text: str) -> list[str]:
    """The checker's complaints from its ``--log_output`` file: the WARNING block, split on its separator."""
    lines = text.splitlines()
    blocks: list[str] = []
    current: list[str] = []
    capturing = False
    for line in lines:
        if line.startswith("WARNING - "):
            capturing = True
            line = line[len("WARNING - "):].strip()
        elif line.startswith(("INFO - ", "ERROR - ")):
            capturing = False
            if current:
                blocks.append("\n".join(current).strip())
                current = []
            continue
        if not capturing:
            continue
        if line.strip() == SEPARATOR:
            blocks.append("\n".join(current).strip())
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current).strip())
    return [block[:MAX_MESSAGE_CHARS] for block in blocks if block]


def check(path: Path, ruleset: str) -> MlperfCheck:
    """MLPerf's compliance checker (the installed package's CLI) on one MLLOG file, for one ruleset."""
    with tempfile.TemporaryDirectory(prefix="tprimat-mlperf-check-") as tmp:
        out = Path(tmp) / "checker.log"
        command = [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training",
                   "--ruleset", ruleset, "--log_output", str(out), str(path)]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return MlperfCheck(ruleset=ruleset, verdict=None, reason=f"the checker did not run: {exc}")
        text = out.read_text(errors="replace") if out.is_file() else ""
    last = text.strip().splitlines()[-1] if text.strip() else ""
    if last.endswith("SUCCESS") and proc.returncode == 0:
        return MlperfCheck(ruleset=ruleset, verdict="SUCCESS", messages=_messages(text))
    if last.endswith("FAILED"):
        return MlperfCheck(ruleset=ruleset, verdict="FAILED", messages=_messages(text))
    tail = (proc.stderr or text).strip().splitlines()[-1:] or ["no output"]
    return MlperfCheck(ruleset=ruleset, verdict=None,
                       reason=f"the checker stopped with exit code {proc.returncode}: {tail[0][:300]}")


def rcp_point(gbs: int | None, ruleset: str = RULESET_OF_RECORD) -> MlperfRcp:
    """What the package's reference convergence points say about this GBS (one run cannot be RCP-checked)."""
    name = f"rcp_checker/training_{ruleset}/rcps_{BENCHMARK}.json"
    source = f"{PACKAGE} {package_version()}: mlperf_logging/{name}"
    try:
        points = json.loads(resources.files("mlperf_logging").joinpath(name).read_text())
    except (ModuleNotFoundError, FileNotFoundError, json.JSONDecodeError) as exc:
        return MlperfRcp(gbs=gbs, kind="none", source=source, note=f"not readable: {exc}")
    by_bs = {int(p["BS"]): p for p in points.values() if isinstance(p, dict) and "BS" in p}
    if gbs in by_bs:
        p = by_bs[gbs]
        hp = p.get("Hyperparams", {})
        return MlperfRcp(gbs=gbs, kind="point", source=source, base_lr=hp.get("opt_base_learning_rate"),
                         warmup_samples=hp.get("opt_learning_rate_warmup_samples"),
                         note=f"an RCP point ({len(p.get('Epochs to converge', []))} reference runs)")
    if by_bs and gbs is not None and min(by_bs) < gbs < max(by_bs):
        return MlperfRcp(gbs=gbs, kind="interpolated", source=source,
                         note=f"no point at GBS {gbs}: the checker interpolates between {sorted(by_bs)}")
    return MlperfRcp(gbs=gbs, kind="none", source=source,
                     note=f"no RCP at GBS {gbs} (points: {sorted(by_bs)}): no convergence claim can be made")


def mlperf_record(result: Result, path: Path) -> Mlperf:
    """Write the run's MLLOG to ``path`` (atomically) and check it: the result's ``mlperf`` block, never an exception.
    Without mlperf-logging, a quality block or a start time the block says why and holds no verdict."""
    version = package_version()
    base: dict[str, Any] = {"benchmark": BENCHMARK, "derived_from": DERIVED_FROM, "not_a_submission": NOT_A_SUBMISSION,
                            "checker": f"{PACKAGE} {version}" if version else None,
                            "ruleset_of_record": RULESET_OF_RECORD}
    if version is None:
        return Mlperf(**base, reason=f"{PACKAGE} is not installed (pinned {PINNED} in the requirements files)")
    base["rcp"] = rcp_point(result.training_config.workload.GBS)
    try:
        text = mllog_text(result)
    except MllogError as exc:
        return Mlperf(**base, reason=str(exc))
    atomic_write_text(path, text)
    checks = [check(path, ruleset) for ruleset in (RULESET_OF_RECORD, *OTHER_RULESETS)]
    return Mlperf(**base, mllog=path.name, verdict=checks[0].verdict, checks=checks)


def mlperf_block(result: Result, result_path: Path) -> Mlperf:
    """The ``mlperf`` block of the PROFILE=mlperf result at ``result_path`` (its MLLOG beside it): a failure to write or
    check the MLLOG is the block's reason, never a crash, for the result must still be written."""
    try:
        return mlperf_record(result, mllog_path(result_path))
    except Exception as exc:
        return Mlperf(benchmark=BENCHMARK, derived_from="tprimat", not_a_submission="not an MLPerf submission",
                      reason=f"writing or checking the MLLOG failed: {type(exc).__name__}: {exc}")
