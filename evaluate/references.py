"""Published reference points (``evaluate/references.json``) and matching results against them.

A measured number means more next to what others published for the same
workload. A result matches a reference when model, precision (FP8 or BF16),
sequence length, full model size and GPU family agree; a result below
``flag_below_fraction`` (half) of its reference is almost always a
misconfiguration (wrong parallelism, no fused kernels, FP8 silently off), so it is
flagged rather than reported as a hardware verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from utils.result_model import Result

REFERENCES_PATH = Path(__file__).with_name("references.json")
REQUIRED_FIELDS = ("id", "name", "kind", "tokens_per_second_per_gpu", "model", "model_size", "precision",
                   "seq_len", "global_batch_size", "num_gpus", "gpu_family", "source", "verified")


@dataclass(frozen=True)
class Reference:
    id: str
    name: str
    kind: str  # published | floor
    tokens_per_second_per_gpu: float
    model: str
    model_size: str
    precision: str  # bf16 | fp8
    seq_len: int
    global_batch_size: int | None
    num_gpus: int
    gpu_family: str
    source_title: str
    source_url: str
    verified: bool
    note: str

    def config_text(self) -> str:
        gbs = self.global_batch_size if self.global_batch_size is not None else "n/s"
        return (f"{self.model} {self.model_size}, {self.precision.upper()}, SL={self.seq_len}, GBS={gbs}, "
                f"{self.num_gpus}x{self.gpu_family}")


@dataclass(frozen=True)
class ReferenceMatch:
    reference: Reference
    measured: float
    fraction: float  # measured / reference
    flagged: bool  # below the flag fraction: likely misconfigured

    def verdict(self) -> str:
        if self.flagged:
            return f"LIKELY MISCONFIGURED: {self.fraction:.0%} of the reference (below half)"
        if self.reference.kind == "floor" and self.fraction < 1.0:
            return f"below the validation floor ({self.fraction:.0%})"
        return f"{self.fraction:.0%} of the reference"


@lru_cache(maxsize=4)
def load_references(path: Path = REFERENCES_PATH) -> tuple[tuple[Reference, ...], float]:
    """(references, flag fraction) from the data file; a malformed entry is an error naming it."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for index, entry in enumerate(data["references"]):
        missing = [f for f in REQUIRED_FIELDS if f not in entry]
        if missing:
            raise ValueError(f"{path}: reference #{index} ({entry.get('id')}): missing {', '.join(missing)}")
        out.append(Reference(
            id=entry["id"], name=entry["name"], kind=entry["kind"],
            tokens_per_second_per_gpu=float(entry["tokens_per_second_per_gpu"]), model=entry["model"],
            model_size=entry["model_size"], precision=entry["precision"], seq_len=int(entry["seq_len"]),
            global_batch_size=entry["global_batch_size"], num_gpus=int(entry["num_gpus"]),
            gpu_family=entry["gpu_family"], source_title=entry["source"]["title"], source_url=entry["source"]["url"],
            verified=bool(entry["verified"]), note=entry.get("note", ""),
        ))
    return tuple(out), float(data.get("flag_below_fraction", 0.5))


def result_precision(result: Result) -> str | None:
    """``fp8`` or the configured precision (``bf16``); None when the result does not know it."""
    workload = result.training_config.workload
    if workload.FP8:
        return "fp8"
    return workload.PRECISION if workload.FP8 is not None else None


def matches(reference: Reference, result: Result) -> bool:
    """Same model, full size, precision, sequence length and GPU family (a key the result lacks never matches)."""
    workload = result.training_config.workload
    size, seq_len = workload.MODEL_SIZE, workload.SL
    device = result.gpu_info.device_name or ""
    return (
        result.model == reference.model
        and size == reference.model_size
        and result_precision(result) == reference.precision
        and seq_len == reference.seq_len
        and reference.gpu_family.upper() in device.upper()
    )


def match_references(result: Result, measured: float | None) -> list[ReferenceMatch]:
    """Every reference ``result`` matches, with the measured fraction and the misconfiguration flag."""
    if measured is None:
        return []
    references, flag_fraction = load_references()
    out = []
    for reference in references:
        if matches(reference, result):
            fraction = measured / reference.tokens_per_second_per_gpu
            out.append(ReferenceMatch(reference, measured, fraction, fraction < flag_fraction))
    return out
