"""One run's facts and its system's description as a tprimat result, labelled as what it is.

The ``published`` block names the source and the framework is ``mlperf``: it never passes for a tprimat measurement.
Time to train is ``run_stop - run_start``; throughput is samples to the target over that time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from evaluate.mlperf.run import RunFacts
from evaluate.mlperf.score import Counted, SystemScore
from evaluate.mlperf.sources import RunRef
from train.profiles.mlperf import BENCHMARK, MODEL, value_of
from utils.io.sanitise import one_line
from utils.measure.plausible import vendor
from utils.measure.quality import with_energy
from utils.schema.model import Result
from utils.schema.quality import Evaluation, Quality
from utils.schema.run import Workload
from utils.spec.models import get_shape
from utils.spec.registry import PLATFORMS, PUBLISHED_FRAMEWORK, framework_names


@dataclass(frozen=True)
class Benchmark:
    """An MLPerf benchmark tprimat holds as one of its models, and the target a log may leave unstated."""

    model: str
    size: str
    target: float
    source: str


BENCHMARKS = {BENCHMARK: Benchmark(MODEL, "full", value_of("target_loss"),
                                   "train/profiles/mlperf.py target_loss (MLPerf's eval_accuracy <= 3.3)")}
REDUCTION = "the submitter's eval_accuracy: MLPerf's log perplexity on its held-out sequences"
ENERGY = "an MLLOG holds no energy reading"
# A closed-division run uses the reference's quality measure (training_policies training_rules.adoc line 443): the
# same held-out sequences at every evaluation (issue 50); tprimat's own MLLOG states its stack's in its tprimat_ keys.
PUBLISHED_MEASURE = ("MLPerf's measure: a closed-division submission evaluates as the reference does, the same "
                     "held-out sequences every time (training_rules.adoc line 443)")
SCHEDULES = {"cosine with linear warmup": "cosine"}
# MLLOG key -> (Workload key, how it is read)
WORKLOAD_KEYS = {"global_batch_size": ("GBS", "count"), "max_sequence_length": ("SL", "count"),
                 "micro_batch_size": ("MBS", "count"), "gradient_accumulation_steps": ("GA", "count"),
                 "tensor_parallelism": ("TP", "count"), "pipeline_parallelism": ("PP", "count"),
                 "context_parallelism": ("CP", "count"), "opt_learning_rate_warmup_steps": ("WARMUP_STEPS", "count"),
                 "seed": ("SEED", "whole"), "opt_base_learning_rate": ("LR", "figure"),
                 "opt_end_learning_rate": ("MIN_LR", "figure"), "opt_adamw_weight_decay": ("WEIGHT_DECAY", "figure"),
                 "opt_adamw_beta_1": ("BETA1", "figure"), "opt_adamw_beta_2": ("BETA2", "figure"),
                 "opt_gradient_clip_norm": ("GRAD_CLIP", "figure")}


class ImportRefused(ValueError):
    """The run cannot be a result; the message is the one-line reason."""


def iso(ms: float | None) -> str | None:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat() if ms is not None else None


def _workload(facts: RunFacts, gpus: int) -> dict[str, Any]:
    values: dict[str, Any] = {"WORLD_SIZE": gpus}
    for key, (name, kind) in WORKLOAD_KEYS.items():
        number = facts.number(key)
        if kind == "count":
            values[name] = facts.count(key) if key != "opt_learning_rate_warmup_steps" or number != 0 else 0
        elif kind == "whole":
            values[name] = int(number) if number is not None and number.is_integer() and number >= 0 else None
        else:
            values[name] = number if number is not None and number >= 0 else None
    schedule = facts.setting("opt_learning_rate_decay_schedule")
    values["LR_DECAY"] = SCHEDULES.get(schedule, schedule) if isinstance(schedule, str) else None
    parallel = [values.get(k) for k in ("TP", "PP", "CP")]
    if all(parallel) and gpus % (parallel[0] * parallel[1] * parallel[2]) == 0:
        values["DP"] = gpus // (parallel[0] * parallel[1] * parallel[2])
    linear = facts.setting("lowest_numerical_precision_in_linear")
    if isinstance(linear, str):
        values["FP8"] = linear.lower() == "fp8"
        values["PRECISION"] = facts.setting("lowest_numerical_precision_in_attn") or linear
    values["unknown"] = {k: f"not stated in the MLLOG{' (MLPerf v5.1 logs need not state it)' if k in _V51 else ''}"
                         for k in _ALL if values.get(k) is None}
    values["unknown"].update({k: _REASONS[k] for k in _REASONS if values.get(k) is None})
    return values


_ALL = tuple(key for key in Workload.model_fields if key != "unknown")
_V51 = ("MBS", "TP", "PP", "CP", "DP", "PRECISION", "FP8")
_REASONS = {"DATASET": "the submitter's data: MLPerf's C4 shards (not tprimat's DATASET)",
            "DATA_SAMPLES": "the submitter's data: MLPerf's C4 shards (not tprimat's DATASET)",
            "TRAIN_ITERS": "an MLLOG states the schedule's horizon (max_steps), not a step budget: the run ends at "
                           "the target",
            "INIT_STD": "not in an MLLOG"}


def _quality(facts: RunFacts, bench: Benchmark, gbs: int, sl: int, platform: str, gpus: int,
             published: bool) -> Quality | None:
    """The evaluations as the ``quality`` block; figures to target by ``utils/measure/quality.py``."""
    if not facts.evaluations or facts.start_ms is None:
        return None
    fixed, measure = facts.setting("tprimat_eval_fixed_set"), facts.setting("tprimat_eval_measure")
    if published and facts.setting("submission_division") == "closed":
        fixed, measure = True, PUBLISHED_MEASURE
    interval = facts.count("tprimat_eval_interval_samples") or (
        facts.evaluations[1].samples - facts.evaluations[0].samples if len(facts.evaluations) > 1
        else facts.evaluations[0].samples)
    target = facts.number("target_accuracy") or bench.target
    evaluations = [Evaluation(step=max(1, e.samples // gbs), samples=e.samples, tokens=e.samples * sl,
                              seconds=max(0.0, (e.time_ms - facts.start_ms) / 1000), loss=e.loss,
                              loss_reason=None if e.loss is not None else "eval_accuracy is not a finite number",
                              eval_seconds=e.eval_ms / 1000 if e.eval_ms is not None and e.eval_ms >= 0 else None,
                              unix_s=e.time_ms / 1000) for e in facts.evaluations]
    ended = facts.stop_status == "success" and evaluations[-1].loss is not None and evaluations[-1].loss <= target
    block = Quality.model_construct(
        eval_samples=facts.count("eval_samples") or 1, eval_interval_samples=interval,
        eval_interval_steps=max(1, round(interval / gbs)),
        reduction=facts.setting("tprimat_eval_reduction") or REDUCTION,
        fixed_set=fixed if isinstance(fixed, bool) else None, measure=measure if isinstance(measure, str) else None,
        target_loss=target, stop_at_target=True,
        run_start_unix=facts.start_ms / 1000, evaluations=evaluations,
        stop_reason="run_stop: success at the target (MLPerf ends a run there)" if ended else None)
    return with_energy(block, platform=platform, gpus=gpus, energy=None, energy_reason=ENERGY)


def _performance(facts: RunFacts, quality: Quality | None, gbs: int, sl: int, gpus: int,
                 own: bool) -> dict[str, Any] | None:
    """Over the samples to the target; a tprimat run that stopped short of it: over the samples to its last
    evaluation (a published run that did not converge has no figures: it failed)."""
    if facts.stop_ms is None or facts.start_ms is None or quality is None or not (quality.reached or own):
        return None
    seconds = (facts.stop_ms - facts.start_ms) / 1000
    samples = (facts.converged_samples or quality.samples_to_target or 0) if quality.reached \
        else quality.evaluations[-1].samples
    rate = samples / seconds if seconds > 0 else None
    return {"measured_steps": samples // gbs, "skipped_steps": 0, "step_time_seconds": None,
            "avg_step_time_seconds": None, "median_step_time_seconds": None, "total_time_seconds": seconds,
            "tokens_per_step": gbs * sl, "tokens_per_second": rate * sl if rate else None,
            "tokens_per_second_per_gpu": rate * sl / gpus if rate else None,
            "steps_per_second": rate / gbs if rate else None, "flops_per_token": None, "tflops_per_gpu": None,
            "peak_tflops": None, "peak_precision": "bf16", "mfu": None,
            "mfu_reason": "not computed for a published run: its log does not state its matrix precision",
            "throughput_basis": ("samples to the target (the last evaluation before run_stop, the RCP checker's)"
                                 if quality.reached else "samples to the last evaluation (the target not reached)")
            + " x SL / time to train (run_stop - run_start, evaluations included: MLPerf's clock)",
            "total_time_basis": "run_stop - run_start: MLPerf's time to train"}


def _own_gpus(facts: RunFacts) -> int:
    """The GPUs of a tprimat MLLOG: its submission_platform reads ``<n>x <device> <framework>``."""
    match = re.match(r"(\d{1,6})x ", str(facts.setting("submission_platform") or ""))
    return max(1, int(match.group(1))) if match else 1


def _shape(facts: RunFacts, bench: Benchmark) -> dict[str, Any]:
    """The model that trained: the benchmark's, or a tprimat MLLOG's own (its display name, proxies included)."""
    own = facts.setting("tprimat_model")
    if isinstance(own, str) and own != get_shape(bench.model, bench.size).display_name:
        proxy = re.search(r"\[(\d+) of \d+ layers\]", own)
        size = "tiny" if "(tiny)" in own else "full"
        return get_shape(bench.model, size, layers=int(proxy.group(1)) if proxy else None).as_dict()
    return get_shape(bench.model, bench.size).as_dict()


def build(run: RunRef, digest: str, facts: RunFacts, system: dict[str, Any] | None, round_: str | None,
          counted: Counted, score: SystemScore | None, check: str | None) -> Result:
    """The result of one run; :class:`ImportRefused` (one line) when it cannot be one."""
    bench = BENCHMARKS.get(facts.benchmark or run.benchmark or "")
    if bench is None:
        raise ImportRefused(f"benchmark {one_line(facts.benchmark, 40)}: tprimat holds no model for it "
                            f"(it reads {', '.join(BENCHMARKS)})")
    if facts.problems:
        raise ImportRefused(facts.problems[0])
    own = system is None
    platform = facts.setting("tprimat_platform") if own else vendor(system.get("accelerator_model_name"))
    framework = facts.setting("tprimat_framework") if own else PUBLISHED_FRAMEWORK
    if platform not in PLATFORMS or (own and framework not in framework_names()):
        raise ImportRefused("its platform is unknown: " + ("no system description beside the log (<submitter>/systems/"
                            "<system>.json) and no tprimat keys in it" if own else "the system's accelerator "
                            f"{one_line(system.get('accelerator_model_name'))} names neither vendor or both"))
    stated = vendor(facts.setting("submission_platform"))
    if not own and stated is not None and stated != platform:
        raise ImportRefused(f"the system description's accelerator {one_line(system.get('accelerator_model_name'))} "
                            f"({platform}) disagrees with the log's submission_platform "
                            f"{one_line(facts.setting('submission_platform'), 60)} ({stated})")
    gpus = system["gpus"] if not own else _own_gpus(facts)
    gbs, sl = facts.count("global_batch_size"), facts.count("max_sequence_length")
    if gbs is None or sl is None:
        raise ImportRefused("no whole global_batch_size or max_sequence_length in the log")
    workload, shape = _workload(facts, gpus), _shape(facts, bench)
    workload["MODEL_SIZE"] = shape["size"]
    workload["unknown"].pop("MODEL_SIZE", None)
    quality = _quality(facts, bench, gbs, sl, platform, gpus, published=not own)
    perf = _performance(facts, quality, gbs, sl, gpus, own)
    success = facts.stop_status == "success" or (own and facts.stop_status is not None)
    status = "ok" if success and (perf is not None or own) else "incomplete" if facts.stop_ms is None else "failed"
    error = None if status == "ok" else (
        "no run_stop: the log ends before the run did (truncated?)" if facts.stop_ms is None else
        f"run_stop status {facts.stop_status or 'unstated'}" + ("" if success else ": the run did not converge"))
    warnings = [f"{len(facts.failed_lines)} MLLOG line(s) are not MLLOG JSON (first: "
                f"{one_line(facts.failed_lines[0][1], 80)})"] if facts.failed_lines else []
    data: dict[str, Any] = {
        "status": status, "error": error, "warnings": warnings, "platform": platform, "framework": framework,
        "model": bench.model, "profile": "mlperf", "started_at": iso(facts.start_ms), "finished_at": iso(facts.stop_ms),
        "gpu_info": {"device_name": system["accelerator_model_name"] if not own else None, "device_count": gpus,
                     "total_memory_gb": None, "software_stack": PLATFORMS[platform].software_stack,
                     "software_version": None, "pytorch_version": None, "driver_version": None},
        "training_config": {"max_steps": None, "global_batch_size": gbs, "micro_batch_size": workload.get("MBS"),
                            "sequence_length": sl, "num_gpus": gpus, "workload": workload,
                            "nnodes": system.get("nodes") if not own else None,
                            "gpus_per_node": system.get("per_node") if not own else None},
        "model_shape": shape,
        "effective_settings": {"settings": {k: v for k, v in facts.settings.items() if not k.startswith("submission_")},
                               "resolved_by": f"the MLLOG's records before run_start ({run.place})"},
        "performance_metrics": perf, "quality": quality.model_dump() if quality is not None else None,
        "source": {"kind": "mlperf", "log_path": run.place, "format": "MLLOG", "lines": facts.lines,
                   "files": [{"path": run.place, "sha256": digest}],
                   "first_timestamp": iso(facts.start_ms), "last_timestamp": iso(facts.stop_ms)},
    }
    if run.name and run.name.startswith("result_"):
        data["run_index"] = int(run.name[len("result_"):-len(".txt")]) + 1
    if not own:
        data["published"] = _published(run, digest, facts, system, round_, counted, score, check)
    return Result.model_validate(data, strict=True)  # as read_result reads it back


def _published(run: RunRef, digest: str, facts: RunFacts, system: dict[str, Any], round_: str | None,
               counted: Counted, score: SystemScore | None, check: str | None) -> dict[str, Any]:
    text = {k: one_line(system.get(k) or "", 200) for k in ("system_name", "division", "status", "framework")}
    return {"origin": f"MLPerf Training v{round_} (mlcommons/training_results_v{round_}), published by {run.submitter}"
                      if round_ else f"MLPerf Training (round not known), published by {run.submitter}",
            "round": round_ or "unknown", "submitter": run.submitter, "system": text["system_name"],
            "system_id": run.system, "benchmark": facts.benchmark or run.benchmark, "division": text["division"],
            "availability": text["status"], "accelerator": one_line(system["accelerator_model_name"], 200),
            "nodes": system["nodes"], "accelerators_per_node": system["per_node"], "framework": text["framework"],
            "notes": system["notes"], "log": run.place, "log_sha256": digest,
            "run_status": facts.stop_status, "counted": counted.counted, "counted_reason": counted.reason,
            "score_min": score.score_min if score else None, "score_reason": score.reason if score else None,
            "scaling_factor": score.scaling if score else None, "rcp": score.rcp if score else None,
            "check": check if check in ("SUCCESS", "FAILED") else None,
            "check_reason": None if check in ("SUCCESS", "FAILED") else "not run (import --check runs it)"}


def describe(data: Any, where: str) -> dict[str, Any]:
    """A system description's fields the import uses; :class:`ImportRefused` when one is missing or no number."""
    if not isinstance(data, dict):
        raise ImportRefused(f"{where}: not a system description (a JSON object)")
    missing = [k for k in ("accelerator_model_name", "accelerators_per_node", "number_of_nodes") if not data.get(k)]
    if missing:
        raise ImportRefused(f"{where}: no {', '.join(missing)}")
    try:
        nodes, per_node = int(str(data["number_of_nodes"])), int(str(data["accelerators_per_node"]))
    except ValueError:
        raise ImportRefused(f"{where}: number_of_nodes or accelerators_per_node is no whole number") from None
    if not (0 < nodes <= 100_000 and 0 < per_node <= 1_000):
        raise ImportRefused(f"{where}: {nodes} nodes of {per_node} accelerators is no system")
    notes = "; ".join(one_line(data.get(k), 200) for k in ("hw_notes", "sw_notes") if isinstance(data.get(k), str)
                      and data.get(k))
    return {**data, "nodes": nodes, "per_node": per_node, "gpus": nodes * per_node, "notes": notes}
