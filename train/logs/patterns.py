"""The regex table of Megatron-LM and Primus log lines, and the parsing of one line.

Formats and the versions each was checked against: tests/fixtures/logs/README.md. Fields are found by their
labels anywhere in a line, so loguru prefixes, ANSI colours and torchrun ``[defaultN]:`` tags do not matter
(core_v0.12 even prints ``...sizes: Nonetensor-model-parallel size`` without a separator). Evaluation lines:
``megatron/training/training.py:2672-2700`` after the ``evaluate`` timer (``megatron/core/timers.py:318-335``),
Primus's the same behind its prefix, NeMo 2.3's ``val_loss`` (``progress_printer.py:55-63, 170-183``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NEMO_PREFIX = "nemo"  # every NeMo format name starts so (text log and TensorBoard)
NEMO_FORMAT = f"{NEMO_PREFIX} (ProgressPrinter)"
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
NUM_OR_NAN = rf"(?:{NUM}|[-+]?(?:nan|inf(?:inity)?))"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
TORCHRUN_TAG = re.compile(r"^\s*\[(?:default|rank)\d+\]:\s?")

ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)\]\s*iteration\b")
ELAPSED = re.compile(rf"elapsed time per iteration \(ms\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TFLOPS_PAIR = re.compile(rf"throughput per GPU \(TFLOP/s/GPU\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TFLOPS_NEW = re.compile(rf"compute per GPU \(TFLOP/s/GPU\):\s*({NUM})(?:\s*\(avg\s*({NUM})\))?")
TOKENS_PAIR = re.compile(rf"tokens per GPU \(tokens/s/GPU\):\s*({NUM})(?:\s*/\s*({NUM}))?")
TOKENS_NEW = re.compile(rf"tokens/s/GPU inst/harmonic mean:\s*({NUM})\s*/\s*({NUM})")
LEARNING_RATE = re.compile(rf"learning rate:\s*({NUM})")
GLOBAL_BATCH = re.compile(r"global batch size:\s*(\d+)")
LM_LOSS = re.compile(rf"lm loss:\s*({NUM_OR_NAN})", re.IGNORECASE)
LOSS_SCALE = re.compile(rf"loss scale:\s*({NUM})")
GRAD_NORM = re.compile(rf"grad norm:\s*({NUM_OR_NAN})", re.IGNORECASE)
SKIPPED = re.compile(r"number of skipped iterations:\s*(\d+)")
NAN_ITERATIONS = re.compile(r"number of nan iterations:\s*(\d+)")
HIP_MEMORY = re.compile(
    rf"(?:hip|rocm) mem usage/free/total/usage_ratio:\s*({NUM})\s*Gi?B\s*/\s*({NUM})\s*Gi?B\s*/\s*({NUM})\s*Gi?B"
    rf"\s*/\s*({NUM})\s*%"
)
ENERGY = re.compile(rf"energy per GPU \(J/iter/GPU\):\s*({NUM})")
POWER = re.compile(rf"power per GPU \(W/GPU\):\s*({NUM})")
REPORT_CONTEXT = re.compile(r"(?:\[Rank\s+(\d+)\]\s*)?(?:\(after\s+(\d+)\s+iterations\)\s*)?memory \((?:MB|GB)\)")
MEMORY_MB = re.compile(
    rf"memory \(MB\)\s*\|\s*allocated:\s*({NUM})\s*\|\s*max allocated:\s*({NUM})\s*\|\s*reserved:\s*({NUM})"
    rf"\s*\|\s*max reserved:\s*({NUM})"
)
MEMORY_GB = re.compile(
    rf"memory \(GB\)\s*\|\s*current_allocated_mem:\s*({NUM})\s*\|\s*peak_allocated_mem:\s*({NUM})"
    rf"\s*\|\s*peak_reserved_mem:\s*({NUM})"
)
# Evaluation lines (see the module docstring).
VALIDATION = re.compile(r"\bvalidation(?:-(\d+))? loss at iteration (\d+)( on (?:validation|test) set)?\s*\|(.*)$")
VALIDATION_VALUE = re.compile(rf"([\w ]+?) value:\s*({NUM_OR_NAN})\s*\|", re.IGNORECASE)
VALIDATION_PPL = re.compile(rf"PPL:\s*({NUM_OR_NAN})\s*\|", re.IGNORECASE)
EVAL_TIMER = re.compile(rf"^\s*evaluate \.*:\s*(?:\(({NUM}),\s*({NUM})\)|({NUM}))\s*$")
NEMO_VALIDATION = re.compile(r"(?<!checking )\bValidation: iteration (\d+)/(\d+)")
NEMO_VAL_LOSS = "val_loss"
PADDED_VOCAB = re.compile(r"> padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")

# What ran, besides the iteration lines.
WORLD_LINE = re.compile(r"using world size: (\d+), data-parallel size: (\d+)")
WORLD_LINE_SIZES = {
    "context_parallel_size": re.compile(r"(?<!hierarchical )context-parallel size: (\d+)"),
    "tensor_model_parallel_size": re.compile(r"(?<!encoder-)tensor-model-parallel size: (\d+)"),
    "pipeline_model_parallel_size": re.compile(r"(?<!encoder-)pipeline-model-parallel size: (\d+)"),
}
# Primus's loguru prefix: ``[YYYYmmdd HH:MM:SS][field]...[LEVEL] [----module.py:N] : message``.
LOGURU_PREFIX = re.compile(
    r"^\s*(?:\(PrimusMaster[^)]*\)\s*)?\[\d{8} \d{2}:\d{2}:\d{2}\](?:\[[^\]]*\])*\s?(?:\[-*[\w.]+:\d+\]\s?:\s?)?")
LOGURU_RANK = re.compile(r"^\s*\[\d{8} \d{2}:\d{2}:\d{2}\](?:\[[^\]]*\])*?\[rank-(\d+)/(\d+)\]")
PRIMUS_WORLD = re.compile(r"^-world_size:\s+(\d+)\s*$")
LIGHTNING_WORLD = re.compile(r"Initializing distributed: GLOBAL_RANK: \d+, MEMBER: \d+/(\d+)")
NEMO_LINE = re.compile(r"Training epoch \d+, iteration (\d+)/(\d+)((?:\s*\|\s*[^|:]+:\s*[^|]*)*)")
NEMO_FIELD = re.compile(rf"^\s*([^:]+?):\s*({NUM_OR_NAN})\s*$", re.IGNORECASE)
LAUNCH_HEADER = "tprimat launch:"
LAUNCH_LINE = re.compile(r"^tprimat launch: ((?:\w+=\S*\s*)+)$")
# One regex for both platforms; the group that matched names the platform. A line holds a marker only if it
# holds one of the PLATFORM_WORDS (lower case), checked first because almost no line does.
PLATFORM_MARKERS = re.compile(
    r"(?P<amd>(?:hip|rocm) mem usage|\bRCCL\b|\bROCm\b|/opt/rocm\b|\bHIP out of memory|\bMI3\d\dX\b"
    r"|\bgfx9[0-9a-f]{2}\b)"
    r"|(?P<nvd>\bNCCL version [\d.]+\+cuda|\bCUDA out of memory|\bNVIDIA (?:H100|H200|A100|B200|GB200|GH200)\b)")
PLATFORM_WORDS = ("mem usage", "rccl", "rocm", "hip out", "mi3", "gfx9", "nccl version", "cuda out", "nvidia")


@dataclass(slots=True)
class IterationRecord:
    """One per-iteration line, every field the log carried (None when absent)."""

    iteration: int
    train_iters: int | None  # None: not stated (TensorBoard events)
    line_no: int
    timestamp: str | None = None
    step_time_s: float | None = None
    framework_avg_step_time_s: float | None = None
    tflops_per_gpu: float | None = None
    framework_avg_tflops_per_gpu: float | None = None
    tokens_per_gpu: float | None = None
    framework_avg_tokens_per_gpu: float | None = None
    learning_rate: float | None = None
    global_batch_size: int | None = None
    loss: float | None = None
    loss_scale: float | None = None
    grad_norm: float | None = None
    skipped_iterations: int | None = None
    nan_iterations: int | None = None
    device_used_gb: float | None = None
    device_total_gb: float | None = None
    energy_j_per_gpu: float | None = None
    power_w_per_gpu: float | None = None
    val_loss: float | None = None  # NeMo's printer repeats the last evaluation's value on training lines


@dataclass(slots=True)
class EvaluationLine:
    """One evaluation a log printed: after which training step, its loss (NaN/Inf as printed), how long it took;
    ``kind`` ``in-loop`` (what a time-to-target counts), ``after training`` or ``test``."""

    iteration: int
    loss: float
    line_no: int
    kind: str = "in-loop"
    key: str = "lm loss"
    perplexity: float | None = None
    eval_seconds: float | None = None  # Megatron's evaluate timer (the slowest rank), when printed
    validation_set: int | None = None  # Megatron's ``validation-i`` with several validation sets
    log_format: str = "megatron-lm"

    @property
    def in_loop(self) -> bool:
        return self.kind == "in-loop"


@dataclass
class MemoryReport:
    """A Megatron memory report line (allocator figures, GiB)."""

    iteration: int | None
    rank: int | None
    allocated_gb: float
    max_allocated_gb: float
    reserved_gb: float | None
    max_reserved_gb: float


def clean_line(raw: str) -> str:
    """Drop ANSI colour codes, carriage returns and a torchrun ``[defaultN]:`` tag."""
    text = ANSI.sub("", raw).replace("\r", "")
    return TORCHRUN_TAG.sub("", text).rstrip("\n")


def _float(match: re.Match[str] | None, group: int = 1) -> float | None:
    if match is None or match.group(group) is None:
        return None
    return float(match.group(group))


def _int(match: re.Match[str] | None) -> int | None:
    return int(match.group(1)) if match else None


def parse_iteration(line: str, line_no: int) -> IterationRecord | None:
    """Fields of one (cleaned) iteration line; None when the line is not one."""
    if "iteration" not in line:  # most lines: no regex needed
        return None
    if "Training epoch" in line:
        return parse_nemo(line, line_no)
    head = ITERATION.search(line)
    if head is None:
        return None
    record = IterationRecord(iteration=int(head.group(1)), train_iters=int(head.group(2)), line_no=line_no)
    stamp = TIMESTAMP.search(line)
    record.timestamp = stamp.group(1) if stamp else None
    elapsed = ELAPSED.search(line)
    if elapsed:
        record.step_time_s = float(elapsed.group(1)) / 1000.0
        avg = _float(elapsed, 2)
        record.framework_avg_step_time_s = None if avg is None else avg / 1000.0
    tflops = TFLOPS_NEW.search(line) or TFLOPS_PAIR.search(line)
    record.tflops_per_gpu, record.framework_avg_tflops_per_gpu = _float(tflops), _float(tflops, 2)
    tokens = TOKENS_NEW.search(line) or TOKENS_PAIR.search(line)
    record.tokens_per_gpu, record.framework_avg_tokens_per_gpu = _float(tokens), _float(tokens, 2)
    record.learning_rate = _float(LEARNING_RATE.search(line))
    record.global_batch_size = _int(GLOBAL_BATCH.search(line))
    record.loss = _float(LM_LOSS.search(line))
    record.loss_scale = _float(LOSS_SCALE.search(line))
    record.grad_norm = _float(GRAD_NORM.search(line))
    record.skipped_iterations = _int(SKIPPED.search(line))
    record.nan_iterations = _int(NAN_ITERATIONS.search(line))
    hip = HIP_MEMORY.search(line)
    if hip:
        record.device_used_gb, record.device_total_gb = float(hip.group(1)), float(hip.group(3))
    record.energy_j_per_gpu = _float(ENERGY.search(line))
    record.power_w_per_gpu = _float(POWER.search(line))
    return record


def parse_evaluation(message: str, line_no: int) -> EvaluationLine | None:
    """Megatron's (and Primus's) validation line, ``message`` without any prefix; None for any other line."""
    if "loss at iteration" not in message:
        return None
    head = VALIDATION.search(message)
    if head is None:
        return None
    value = VALIDATION_VALUE.search(head.group(4))
    if value is None:
        return None
    tail = head.group(3) or ""
    kind = "test" if "test set" in tail else "after training" if tail else "in-loop"
    ppl = VALIDATION_PPL.search(head.group(4))
    return EvaluationLine(iteration=int(head.group(2)), loss=float(value.group(2)), line_no=line_no, kind=kind,
                          key=value.group(1).strip(), perplexity=_float(ppl),
                          validation_set=int(head.group(1)) if head.group(1) is not None else None)


def eval_timer_seconds(message: str) -> float | None:
    """Megatron's ``evaluate ....: (min, max)`` timer entry (ms) as the slowest rank's seconds; None otherwise."""
    if "evaluate " not in message:
        return None
    match = EVAL_TIMER.match(message)
    if match is None:
        return None
    slowest = match.group(2) if match.group(2) is not None else match.group(3)
    return float(slowest) / 1000.0


def nemo_validation_step(message: str) -> int | None:
    """``n`` of NeMo's ``Validation: iteration i/n`` (global batches per validation; not the sanity check's)."""
    if "Validation: iteration" not in message:
        return None
    match = NEMO_VALIDATION.search(message)
    return int(match.group(2)) if match else None


def parse_memory(line: str) -> MemoryReport | None:
    """A ``memory (MB)`` (MiB values) or ``memory (GB)`` report; None otherwise."""
    if "memory (" not in line:
        return None
    context = REPORT_CONTEXT.search(line)
    if context is None:
        return None
    rank = int(context.group(1)) if context.group(1) else None
    iteration = int(context.group(2)) if context.group(2) else None
    mb = MEMORY_MB.search(line)
    if mb:
        values = [float(v) / 1024.0 for v in mb.groups()]
        return MemoryReport(iteration, rank, values[0], values[1], values[2], values[3])
    gb = MEMORY_GB.search(line)
    if gb:
        current, peak, peak_reserved = (float(v) for v in gb.groups())
        return MemoryReport(iteration, rank, current, peak, None, peak_reserved)
    return None


def parse_nemo(line: str, line_no: int) -> IterationRecord | None:
    """A NeMo ``ProgressPrinter`` line (iteration printed 0-based: stored 1-based, as Megatron counts)."""
    head = NEMO_LINE.search(line)
    if head is None:
        return None
    record = IterationRecord(iteration=int(head.group(1)) + 1, train_iters=int(head.group(2)) + 1, line_no=line_no)
    fields: dict[str, float] = {}
    for part in head.group(3).split("|"):
        match = NEMO_FIELD.match(part)
        if match:
            fields[match.group(1).strip()] = float(match.group(2))
    record.step_time_s = fields.get("train_step_timing in s")
    record.loss = fields.get("reduced_train_loss")
    record.learning_rate = fields.get("lr")
    gbs = fields.get("global_batch_size")
    record.global_batch_size = int(gbs) if gbs is not None and gbs.is_integer() else None
    record.tflops_per_gpu = fields.get("TFLOPS_per_GPU")
    record.tokens_per_gpu = fields.get("tokens_per_sec_per_gpu")
    record.val_loss = fields.get(NEMO_VAL_LOSS)
    return record


def message_of(line: str) -> str:
    """A (cleaned) line without Primus's loguru prefix: what the program printed."""
    return LOGURU_PREFIX.sub("", line, count=1)


def world_line(line: str) -> dict[str, int] | None:
    """Megatron's ``using world size: N, data-parallel size: D, ...`` as argument names -> sizes."""
    match = WORLD_LINE.search(line)
    if match is None:
        return None
    sizes = {"world_size": int(match.group(1)), "data_parallel_size": int(match.group(2))}
    for name, pattern in WORLD_LINE_SIZES.items():
        found = pattern.search(line)
        if found:
            sizes[name] = int(found.group(1))
    return sizes


def launch_header(platform: str, framework: str, model: str, run_index: int | None, config_hash: str) -> str:
    """The first line tprimat's launcher writes into a job's log: it marks a log as a tprimat launch."""
    return (f"{LAUNCH_HEADER} platform={platform} framework={framework} model={model} "
            f"run_index={run_index if run_index is not None else '-'} config={config_hash}")


def parse_launch_header(line: str) -> dict[str, str] | None:
    """The fields of a :func:`launch_header` line; None for any other line."""
    match = LAUNCH_LINE.match(line.strip())
    if match is None:
        return None
    return dict(item.split("=", 1) for item in match.group(1).split())


def is_event_file(path: Path) -> bool:
    """TensorBoard names its event files ``events.out.tfevents.<time>.<host>...``."""
    return path.name.startswith("events.") and "tfevents" in path.name


def padded_vocab(line: str) -> int | None:
    """Megatron's ``> padded vocab (... new size: W)``: the embedding rows the run really had."""
    match = PADDED_VOCAB.search(line)
    return int(match.group(3)) if match else None


def log_format(record: IterationRecord, line: str) -> str:
    """Which trainer printed an iteration line, named by the fields it has."""
    if NEMO_LINE.search(line):
        return NEMO_FORMAT
    if TFLOPS_NEW.search(line) or TOKENS_NEW.search(line):
        return "primus (compute/tokens per GPU with averages)"
    if record.framework_avg_step_time_s is not None:
        return "primus (legacy inst/avg pairs)"
    if record.timestamp is not None:
        return "megatron-lm (timestamped)"
    return "megatron-lm (no timestamp)"
