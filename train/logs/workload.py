"""What a log tprimat did not launch says about its run: workload, model, framework and platform.

Nothing is guessed: each key comes from the first source that states it; a key none states is ``None`` with the
reason in ``workload.unknown``; two sources that disagree raise :class:`~train.logs.scan.LogInputError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from train.logs.arguments import arg_bool, arg_float, arg_int, arg_text
from train.logs.scan import LogInputError, LogScan
from utils.config.model import WORKLOAD_KEYS, Config
from utils.dataset.fingerprint import config_hash
from utils.machine.hardware import gpu_info_for_device
from utils.schema.hardware import GpuInfo
from utils.schema.run import TrainingConfig, Workload
from utils.spec.models import ModelShape, get_shape
from utils.spec.registry import FRAMEWORKS, MODELS, PLATFORMS, display_name

# Workload key -> (Megatron argument dest, type). DP, GA, PRECISION and FP8 are derived below.
ARGUMENT_OF: dict[str, tuple[str, type]] = {
    "SEED": ("seed", int), "MBS": ("micro_batch_size", int), "GBS": ("global_batch_size", int),
    "SL": ("seq_length", int), "LR": ("lr", float), "MIN_LR": ("min_lr", float), "LR_DECAY": ("lr_decay_style", str),
    "WARMUP_STEPS": ("lr_warmup_iters", int), "TRAIN_ITERS": ("train_iters", int),
    "WEIGHT_DECAY": ("weight_decay", float), "BETA1": ("adam_beta1", float), "BETA2": ("adam_beta2", float),
    "GRAD_CLIP": ("clip_grad", float), "INIT_STD": ("init_method_std", float),
    "TP": ("tensor_model_parallel_size", int), "PP": ("pipeline_model_parallel_size", int),
    "CP": ("context_parallel_size", int), "DP": ("data_parallel_size", int), "WORLD_SIZE": ("world_size", int),
}
WORLD_LINE_KEYS = {"TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size",
                   "CP": "context_parallel_size", "DP": "data_parallel_size"}
SHAPE_DIMS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups")
SHAPE_FLAGS = {"swiglu": "swiglu", "add_qkv_bias": "qkv_bias"}
SIZES = ("full", "tiny")
# How far a logged (padded) vocabulary may be from the table's: Megatron pads to a multiple of
# make_vocab_size_divisible_by * TP (Qwen 2.5's 151665 tokens become 151680, the table says 152064).
VOCAB_TOLERANCE = 0.01
NO_DATASET = "a log does not carry tprimat's dataset label"


@dataclass
class LogRun:
    """The run a log describes."""

    training: TrainingConfig
    model: str
    shape: ModelShape
    notes: list[str] = field(default_factory=list)


def arguments_workload(args: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Workload keys the arguments state (typed), and why each other key is not known."""
    values: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    for key, (dest, kind) in ARGUMENT_OF.items():
        value = {int: arg_int, float: arg_float, str: arg_text}[kind](args, dest)
        if value is not None:
            values[key] = value
        elif args:
            unknown[key] = f"the arguments block states no usable {dest} ({args.get(dest, 'absent')})"
        else:
            unknown[key] = f"not stated by the log (no arguments block with {dest})"
    if arg_text(args, "lr_warmup_fraction") is not None:
        values.pop("WARMUP_STEPS", None)
        unknown["WARMUP_STEPS"] = (f"the log sets warm-up as lr_warmup_fraction={args['lr_warmup_fraction']}, "
                                   "not as a step count")
    optimizer = arg_text(args, "optimizer")
    if optimizer is not None and optimizer != "adam":
        for key in ("BETA1", "BETA2"):
            values.pop(key, None)
            unknown[key] = f"optimizer {optimizer} has no Adam betas"
    bf16, fp16 = arg_bool(args, "bf16"), arg_bool(args, "fp16")
    if bf16 is not None and fp16 is not None:
        values["PRECISION"] = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    else:
        unknown["PRECISION"] = "not stated by the log (no bf16/fp16 arguments)"
    if "fp8" in args:
        values["FP8"] = arg_text(args, "fp8") is not None
    else:
        unknown["FP8"] = "not stated by the log (no fp8 argument)"
    return values, unknown


class _Sources:
    """Values of one workload key from several places; disagreement is an error naming them."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def agree(self, key: str, stated: dict[str, int | None]) -> int | None:
        known = {where: value for where, value in stated.items() if value is not None}
        if len(set(known.values())) > 1:
            self.problems.append(f"{key}: " + ", ".join(f"{value} in {where}" for where, value in known.items()))
            return None
        return next(iter(known.values()), None)


def _one(values: set[int]) -> int | None:
    return next(iter(values)) if len(values) == 1 else None


def _iteration_facts(scan: LogScan, values: dict[str, Any], unknown: dict[str, str], sources: _Sources) -> None:
    """TRAIN_ITERS and GBS from the iteration lines, checked against the arguments."""
    totals = {r.train_iters for r in scan.iterations if r.train_iters is not None}
    batches = {r.global_batch_size for r in scan.iterations if r.global_batch_size is not None}
    if len(totals) > 1:
        sources.problems.append(f"the iteration lines give different total iterations {sorted(totals)[:5]} "
                                "(more than one run in the log?)")
    total = sources.agree("TRAIN_ITERS", {"the arguments block": values.get("TRAIN_ITERS"),
                                          "the iteration lines": _one(totals)})
    if total is not None:
        values["TRAIN_ITERS"] = total
        unknown.pop("TRAIN_ITERS", None)
    if len(batches) > 1:
        values.pop("GBS", None)
        unknown["GBS"] = (f"the global batch size changes during the log ({min(batches)} to {max(batches)}): "
                          "tokens per step are not one number")
        return
    ramping = arg_text(scan.arguments, "rampup_batch_size") is not None
    if ramping and _one(batches) is not None and values.get("GBS") not in (None, _one(batches)):
        values.pop("GBS")
        unknown["GBS"] = (f"batch size still ramping up (rampup_batch_size): {_one(batches)} in the iteration "
                          f"lines, {scan.arguments['global_batch_size']} at the end of the ramp")
        return
    gbs = sources.agree("GBS", {"the arguments block": values.get("GBS"), "the iteration lines": _one(batches)})
    if gbs is not None:
        values["GBS"] = gbs
        unknown.pop("GBS", None)


def _parallel_facts(scan: LogScan, values: dict[str, Any], unknown: dict[str, str], sources: _Sources) -> None:
    """World size and TP/PP/CP/DP from the arguments and every line that states them; GA derived."""
    stated = {"the arguments block": values.get("WORLD_SIZE"), **scan.world_sizes}
    world = sources.agree("WORLD_SIZE", stated)
    if world is not None:
        values["WORLD_SIZE"] = world
        unknown.pop("WORLD_SIZE", None)
    for key, dest in WORLD_LINE_KEYS.items():
        size = sources.agree(key, {"the arguments block": values.get(key),
                                   "the 'using world size' line": scan.world.get(dest)})
        if size is not None:
            values[key] = size
            unknown.pop(key, None)
    sizes = [values.get(k) for k in ("TP", "PP", "CP", "DP")]
    if world is not None and None not in sizes and sizes[0] * sizes[1] * sizes[2] * sizes[3] != world:
        sources.problems.append(f"TP*PP*CP*DP = {'*'.join(map(str, sizes))} is not the world size {world}")
    gbs, mbs, dp = values.get("GBS"), values.get("MBS"), values.get("DP")
    if gbs and mbs and dp and gbs % (mbs * dp) == 0:
        values["GA"] = gbs // (mbs * dp)
    elif gbs and mbs and dp:
        sources.problems.append(f"GBS {gbs} is not a multiple of MBS*DP = {mbs}*{dp}")
    else:
        missing = [k for k in ("GBS", "MBS", "DP") if not values.get(k)]
        unknown["GA"] = f"GBS / (MBS*DP) cannot be derived: {', '.join(missing)} unknown"


def log_dimensions(scan: LogScan) -> dict[str, Any]:
    """The model dimensions (and SwiGLU/QKV-bias flags) the arguments state, by shape-table field name."""
    args = scan.arguments
    dims: dict[str, Any] = {name: arg_int(args, name) for name in SHAPE_DIMS}
    if arg_bool(args, "group_query_attention") is False:
        dims["num_query_groups"] = dims["num_attention_heads"]  # Megatron ignores num_query_groups without GQA
    for arg, name in SHAPE_FLAGS.items():
        dims[name] = arg_bool(args, arg)
    return {name: value for name, value in dims.items() if value is not None}


def _describe(dims: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in dims.items())


def _vocabulary_fits(vocab: int | None, key: str, size: str) -> bool:
    """A padded vocabulary within VOCAB_TOLERANCE of the table's (tiny shapes take any tokenizer's)."""
    if vocab is None or size == "tiny":
        return True
    return abs(vocab - get_shape(key, size).vocab_size) <= VOCAB_TOLERANCE * get_shape(key, size).vocab_size


def recognise_model(scan: LogScan, model: str | None, model_size: str) -> tuple[str, ModelShape, list[str]]:
    """(model, shape, notes): the shape-table model whose dimensions the log states, checked against ``model``. The
    vocabulary counts too (Mistral 7B has Llama 3.1 8B's layers, widths and heads), within the padding a framework
    adds."""
    dims = log_dimensions(scan)
    vocab = scan.padded_vocab or arg_int(scan.arguments, "padded_vocab_size")
    notes: list[str] = []
    if len([d for d in ("num_layers", "hidden_size", "num_attention_heads") if d in dims]) < 3:
        if model is None:
            raise LogInputError("the log does not state the model's dimensions (no arguments block with num_layers, "
                                "hidden_size, num_attention_heads): pass --model")
        shape = get_shape(model, model_size)
        notes.append(f"the log does not state the model's dimensions: shape taken from --model {model} "
                     f"({shape.display_name}), not checked against the log")
    else:
        described = _describe(dims) + (f", vocabulary {vocab}" if vocab is not None else "")
        matches = [(key, size) for key in MODELS for size in SIZES
                   if all(getattr(get_shape(key, size), name) == value for name, value in dims.items())
                   and _vocabulary_fits(vocab, key, size)]
        if not matches:
            raise LogInputError(f"the log's model ({described}) is not in the shape table (utils/spec/models.py): "
                                "its FLOPs cannot be computed")
        keys = {key for key, _ in matches}
        if model is not None and model not in keys:
            raise LogInputError(f"--model {model} does not match the log's model ({described}: "
                                f"{', '.join(sorted(keys))})")
        model, size = next((k, s) for k, s in matches if model in (None, k))
        shape = get_shape(model, size)
    if vocab is not None and vocab != shape.vocab_size:
        notes.append(f"the log reports a padded vocabulary of {vocab}, not {shape.vocab_size}: FLOPs use the "
                     "logged size")
        shape = get_shape(model, shape.size, vocab_size=vocab)
    return model, shape, notes


def log_workload(scan: LogScan, *, model: str | None = None, model_size: str = "full") -> LogRun:
    """The run's workload, model and shape from the log alone (see the module docstring)."""
    values, unknown = arguments_workload(scan.arguments)
    sources = _Sources()
    _iteration_facts(scan, values, unknown, sources)
    _parallel_facts(scan, values, unknown, sources)
    if sources.problems:
        where = f" (arguments block at {scan.arguments_at})" if scan.arguments_at else ""
        raise LogInputError("the log contradicts itself" + where + ": " + "; ".join(sources.problems))
    model, shape, notes = recognise_model(scan, model, model_size)
    values["MODEL_SIZE"] = shape.size
    data = arg_text(scan.arguments, "data_path") or arg_text(scan.arguments, "train_data_path")
    unknown["DATASET"] = NO_DATASET + (f" (data: {data[:160]})" if data else "")
    unknown["DATA_SAMPLES"] = "the log does not state the dataset's document count"
    unknown = {key: reason for key, reason in unknown.items() if values.get(key) is None}
    precision = values.get("PRECISION")
    fp8_format = arg_text(scan.arguments, "fp8")
    label = None if precision is None else f"{precision}+fp8-{fp8_format}" if fp8_format else precision
    try:
        workload = Workload(**{k: values.get(k) for k in WORKLOAD_KEYS}, unknown=unknown)
        training = TrainingConfig(
            max_steps=workload.TRAIN_ITERS, global_batch_size=workload.GBS, micro_batch_size=workload.MBS,
            sequence_length=workload.SL, num_gpus=workload.WORLD_SIZE, workload=workload, precision_effective=label)
    except ValidationError as exc:
        first = exc.errors()[0]
        field_name = "/".join(str(p) for p in first["loc"])
        raise LogInputError(f"the log states {field_name}={first.get('input')!r}, which is not a valid workload "
                            f"value: {first['msg']}") from None
    return LogRun(training=training, model=model, shape=shape, notes=notes)


def log_framework(scan: LogScan, requested: str | None) -> tuple[str, list[str]]:
    """The framework that printed the log (its lines tell), or ``requested`` with a note when they disagree."""
    hint = scan.framework_hint
    if requested is None:
        if hint is None:
            raise LogInputError("cannot tell which framework wrote the log: pass --framework")
        return hint, []
    if hint is not None and hint != requested:
        return requested, [f"the log looks like {display_name('framework', hint)} output, but --framework "
                           f"{requested} was given: recorded as {requested}"]
    return requested, []


def log_platform(scan: LogScan, framework: str, requested: str | None) -> tuple[str, list[str]]:
    """amd or nvd: ``requested``, else the only platform the framework runs on, else the log's markers."""
    runs_on = FRAMEWORKS[framework].platforms
    evidence = scan.platform_evidence
    if requested is not None:
        if requested not in runs_on:
            raise LogInputError(f"{display_name('framework', framework)} does not run on {requested} "
                                f"(utils/spec/registry.py: {', '.join(runs_on)})")
        others = [f"{p}: {line}" for p, line in evidence.items() if p != requested]
        return requested, [f"--platform {requested}, but the log has a marker of {others[0]}"] if others else []
    if len(runs_on) == 1:
        return runs_on[0], []
    candidates = [p for p in evidence if p in runs_on]
    if len(candidates) == 1:
        return candidates[0], [f"platform {candidates[0]} from the log's {evidence[candidates[0]]}"]
    why = ("markers of both: " + "; ".join(evidence.values())) if candidates else "no RCCL/HIP/ROCm or CUDA marker"
    raise LogInputError(f"cannot tell whether the run was on {' or '.join(runs_on)} ({why}): pass --platform")


def log_gpu_info(platform: str, gpu_name: str | None, world_size: int | None, fp8: bool) -> GpuInfo:
    """The run's devices as far as known: named by ``--gpu-name``, else unknown (never this machine's)."""
    count = world_size or 0
    if gpu_name:
        return gpu_info_for_device(platform, gpu_name, count, "fp8" if fp8 else "bf16")
    return GpuInfo(device_name=None, device_count=count, total_memory_gb=None,
                   software_stack=PLATFORMS[platform].software_stack,  # type: ignore[arg-type]
                   software_version=None, pytorch_version=None, driver_version=None,
                   peak_tflops_reason="the log does not name its device: pass --gpu-name for peak FLOP/s and MFU")


def workload_mismatches(scan: LogScan, cfg: Config) -> list[str]:
    """Why a log of a tprimat launch is not the workload in the config (empty when it is)."""
    found: list[str] = []
    if scan.launch and scan.launch.get("config") not in (None, config_hash(cfg)):
        found.append(f"the log was launched with another config (workload hash {scan.launch['config'][:19]}, "
                     f"config.env now {config_hash(cfg)[:19]}): it is not this workload")
    if scan.train_iters is not None and scan.train_iters != cfg.train_iters:
        found.append(f"the log trains {scan.train_iters} iterations but TRAIN_ITERS={cfg.train_iters}: "
                     "it is not this workload")
    batches = {r.global_batch_size for r in scan.iterations if r.global_batch_size is not None}
    if batches and batches != {cfg.gbs}:
        found.append(f"the log's global batch size {sorted(batches)} is not GBS={cfg.gbs}: not this workload")
    stated, _ = arguments_workload(scan.arguments) if scan.arguments else ({}, {})
    expected = cfg.workload()
    for key, value in stated.items():
        want = expected.get(key)
        same = (math.isclose(value, want, rel_tol=1e-9) if isinstance(value, float) and isinstance(want, float)
                else value == want)
        if key not in ("TRAIN_ITERS", "GBS") and not same:
            name = ARGUMENT_OF[key][0] if key in ARGUMENT_OF else {"PRECISION": "bf16/fp16", "FP8": "fp8"}[key]
            found.append(f"the log's arguments say {name}: {value} but config.env has {key}={want}")
    return found
