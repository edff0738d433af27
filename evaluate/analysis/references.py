"""Published reference points (``evaluate/analysis/references.json``) and matching results against them.

A *tuned* result below ``flag_below_fraction`` of a matching point is flagged as likely misconfigured; an
*identical*-profile result never is (it runs the fairness table, not the vendor's configuration).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from utils.schema.model import Result

REFERENCES_PATH = Path(__file__).with_name("references.json")
REQUIRED_FIELDS = ("id", "name", "kind", "tokens_per_second_per_gpu", "model", "model_size", "precision",
                   "seq_len", "global_batch_size", "num_gpus", "gpu_family", "flop_convention", "source", "verified")
FLOP_CONVENTIONS = ("full", "causal", "not stated")


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
    flop_convention: str  # full | causal | not stated
    source_title: str
    source_url: str
    verified: bool
    note: str
    verified_how: str = ""

    def config_text(self) -> str:
        gbs = self.global_batch_size if self.global_batch_size is not None else "n/s"
        return (f"{self.model} {self.model_size}, {self.precision.upper()}, SL={self.seq_len}, GBS={gbs}, "
                f"{self.num_gpus}x{self.gpu_family}")


@dataclass(frozen=True)
class ReferenceMatch:
    reference: Reference
    measured: float
    fraction: float  # measured / reference
    flagged: bool  # a tuned run below the flag fraction: likely misconfigured
    profile: str = "tuned"

    def verdict(self) -> str:
        if self.flagged:
            return f"LIKELY MISCONFIGURED: {self.fraction:.0%} of the reference (below half)"
        if self.reference.kind == "floor" and self.fraction < 1.0:
            return f"below the validation floor ({self.fraction:.0%})"
        if self.profile != "tuned":
            return f"{self.fraction:.0%} of the reference (identical profile: not the vendor's configuration)"
        return f"{self.fraction:.0%} of the reference"


def _reference(path: Path, index: int, entry: dict) -> Reference:
    missing = [f for f in REQUIRED_FIELDS if f not in entry]
    if missing:
        raise ValueError(f"{path}: reference #{index} ({entry.get('id')}): missing {', '.join(missing)}")
    if entry["flop_convention"] not in FLOP_CONVENTIONS:
        raise ValueError(f"{path}: reference {entry['id']}: flop_convention {entry['flop_convention']!r}: "
                         f"allowed values are {', '.join(FLOP_CONVENTIONS)}")
    return Reference(
        id=entry["id"], name=entry["name"], kind=entry["kind"],
        tokens_per_second_per_gpu=float(entry["tokens_per_second_per_gpu"]), model=entry["model"],
        model_size=entry["model_size"], precision=entry["precision"], seq_len=int(entry["seq_len"]),
        global_batch_size=entry["global_batch_size"], num_gpus=int(entry["num_gpus"]),
        gpu_family=entry["gpu_family"], flop_convention=entry["flop_convention"],
        source_title=entry["source"]["title"], source_url=entry["source"]["url"], verified=bool(entry["verified"]),
        note=entry.get("note", ""), verified_how=entry.get("verified_how", ""),
    )


@lru_cache(maxsize=4)
def load_references(path: Path = REFERENCES_PATH) -> tuple[tuple[Reference, ...], float]:
    """(references, flag fraction) from the data file; a malformed entry is an error naming it."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = tuple(_reference(Path(path), index, entry) for index, entry in enumerate(data["references"]))
    return out, float(data.get("flag_below_fraction", 0.5))


def result_precision(result: Result) -> str | None:
    """``fp8`` or the configured precision (``bf16``); None when the result does not know it."""
    workload = result.training_config.workload
    if workload.FP8:
        return "fp8"
    return workload.PRECISION if workload.FP8 is not None else None


def same_family(family: str, device_name: str) -> bool:
    """``H100`` names "NVIDIA H100 80GB HBM3"; ``B200`` does not name a GB200 (a whole token must match)."""
    return re.search(rf"(?<![A-Z0-9]){re.escape(family.upper())}(?![A-Z0-9])", device_name.upper()) is not None


def matches(reference: Reference, result: Result) -> bool:
    """Same model, full size, precision, sequence length, GBS (where stated) and GPU family (a key the result
    lacks never matches)."""
    workload = result.training_config.workload
    gbs_ok = reference.global_batch_size is None or reference.global_batch_size == workload.GBS
    return (
        result.model == reference.model
        and reference.model_size == workload.MODEL_SIZE
        and result_precision(result) == reference.precision
        and reference.seq_len == workload.SL
        and gbs_ok
        and same_family(reference.gpu_family, result.gpu_info.device_name or "")
    )


def match_references(result: Result, measured: float | None) -> list[ReferenceMatch]:
    """Every reference ``result`` matches, with the measured fraction; only tuned runs are flagged."""
    if measured is None:
        return []
    references, flag_fraction = load_references()
    found = []
    for reference in (r for r in references if matches(r, result)):
        fraction = measured / reference.tokens_per_second_per_gpu
        # only a tuned run can be misconfigured against a vendor's published figure
        flagged = result.profile == "tuned" and reference.kind == "published" and fraction < flag_fraction
        found.append(ReferenceMatch(reference, measured, fraction, flagged, result.profile))
    return found
