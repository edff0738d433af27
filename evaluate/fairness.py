"""Fairness: are the results being compared the same workload?

Two results are comparable only if every key of the fairness table (DESIGN §3,
``utils.configure.WORKLOAD_KEYS``), the precision that actually ran, and the
fingerprints of data, tokenizer, model shape and FLOP convention are identical.
The seeds of this project printed "AMD 6.34x faster" from runs with different
parallelism and precision; this module is what makes tprimat refuse that.

A fingerprint that is missing cannot prove anything, so it counts as a
difference ("unverifiable"), not as a match.

Results of different models are never compared with each other, so the check runs
per model. Only ``ok`` results take part: failed and incomplete runs are shown in
reports but never enter a ratio.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluate.results import LoadedResult
from utils.configure import WORKLOAD_KEYS
from utils.hashing import hash_json

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Difference:
    """One key whose value is not the same in every result of a model."""

    model: str
    key: str
    values: dict[str, Any]  # result label -> value
    unverifiable: bool = False

    def describe(self) -> str:
        shown = ", ".join(f"{label}={_short(value)}" for label, value in sorted(self.values.items()))
        prefix = "cannot verify" if self.unverifiable else "differs"
        return f"[{self.model}] {self.key} {prefix}: {shown}"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "key": self.key, "values": self.values, "unverifiable": self.unverifiable}


@dataclass
class FairnessReport:
    differences: list[Difference] = field(default_factory=list)
    compared: dict[str, list[str]] = field(default_factory=dict)  # model -> labels compared

    @property
    def fair(self) -> bool:
        return not self.differences

    def verdict(self) -> str:
        if not self.compared:
            return "no completed results to compare"
        counts = ", ".join(f"{model}: {len(labels)} result(s)" for model, labels in sorted(self.compared.items()))
        if self.fair:
            return f"FAIR: identical workload, data, tokenizer, model shape and FLOP convention ({counts})"
        return f"NOT FAIR: {len(self.differences)} difference(s) ({counts})"

    def as_dict(self) -> dict[str, Any]:
        return {"fair": self.fair, "verdict": self.verdict(), "compared": self.compared,
                "differences": [d.as_dict() for d in self.differences]}


def _short(value: Any) -> str:
    text = str(value)
    if text.startswith("sha256:"):
        return text[: len("sha256:") + 12]
    return text


def _fingerprint_part(result: LoadedResult, part: str) -> tuple[Any, str | None]:
    """(hash, reason-if-unknown) of ``fingerprint[part]``, which is a dict with ``hash`` or a string."""
    fingerprint = result.data.get("fingerprint")
    if not isinstance(fingerprint, dict):
        return None, "result has no fingerprint"
    value = fingerprint.get(part)
    if isinstance(value, dict):
        if value.get("hash"):
            return value["hash"], None
        return None, str(value.get("reason") or "no hash recorded")
    if value:
        return value, None
    return None, f"fingerprint has no {part}"


def comparison_values(result: LoadedResult) -> dict[str, tuple[Any, str | None]]:
    """Every value the fairness check compares, as (value, reason-if-unknown)."""
    config = result.data["training_config"]
    values: dict[str, tuple[Any, str | None]] = {key: (config.get(key), None) for key in WORKLOAD_KEYS}
    values["precision_effective"] = (config.get("precision_effective"), None)
    values["model_shape"] = (hash_json(result.data["model_shape"]), None)
    values["data hash"] = _fingerprint_part(result, "data")
    values["tokenizer hash"] = _fingerprint_part(result, "tokenizer")
    values["flop_convention"] = _fingerprint_part(result, "flop_convention")
    return values


def check_fairness(results: Iterable[LoadedResult]) -> FairnessReport:
    """Compare every ``ok`` result with the others of the same model; list each difference."""
    by_model: dict[str, list[LoadedResult]] = defaultdict(list)
    for result in results:
        if result.ok:
            by_model[result.model].append(result)
    report = FairnessReport()
    for model, group in sorted(by_model.items()):
        report.compared[model] = [r.label for r in group]
        if len(group) < 2:
            continue  # nothing to compare a lone result with
        table = {r.label: comparison_values(r) for r in group}
        keys = list(next(iter(table.values())))
        for key in keys:
            unknown = {label: f"{UNKNOWN} ({vals[key][1]})" for label, vals in table.items() if vals[key][1]}
            if unknown:
                shown = {label: (unknown.get(label) or vals[key][0]) for label, vals in table.items()}
                report.differences.append(Difference(model, key, shown, unverifiable=True))
                continue
            seen = {label: vals[key][0] for label, vals in table.items()}
            if len({repr(v) for v in seen.values()}) > 1:
                report.differences.append(Difference(model, key, seen))
    return report
