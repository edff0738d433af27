"""Loading a results directory: every ``train_*.json``, validated, grouped into repeated runs.

A broken file (truncated JSON, schema violation) is skipped and named, never a
crash: the comparison of the other files goes on, and the reader is told exactly
which file was left out and why. Schema checking is :func:`utils.result.read_result`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utils.result import ResultError, read_result
from utils.result_model import Result

RESULT_GLOB = "train_*.json"
RUN_SUFFIX = re.compile(r"_r(\d+)$")
PLATFORM_ORDER = {"amd": 0, "nvd": 1, "cpu": 2}
PLATFORM_NAMES = {"amd": "AMD", "nvd": "NVIDIA", "cpu": "CPU"}
FRAMEWORK_NAMES = {"mega": "Megatron-LM", "prim": "Primus", "nemo": "NeMo", "tran": "Transformers (tran)"}
MODEL_NAMES = {"llama": "Llama 3.1 8B", "qwen": "Qwen 2.5 7B"}


@dataclass(frozen=True)
class LoadedResult:
    """One valid result file."""

    path: Path
    data: dict[str, Any]

    @property
    def platform(self) -> str:
        return str(self.data["platform"])

    @property
    def framework(self) -> str:
        return str(self.data["framework"])

    @property
    def model(self) -> str:
        return str(self.data["model"])

    @property
    def status(self) -> str:
        return str(self.data["status"])

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str:
        """Short name used in tables and difference lists: the file name without ``train_``/``.json``."""
        stem = self.path.stem
        return stem[len("train_"):] if stem.startswith("train_") else stem

    @property
    def run_index(self) -> int | None:
        if self.data.get("run_index") is not None:
            return int(self.data["run_index"])
        match = RUN_SUFFIX.search(self.path.stem)
        return int(match.group(1)) if match else None

    def perf(self, key: str) -> Any:
        return (self.data.get("performance_metrics") or {}).get(key)


@dataclass
class RunGroup:
    """All runs of one (platform, framework, model): repeated runs are aggregated, failures shown apart."""

    platform: str
    framework: str
    model: str
    runs: list[LoadedResult] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.platform, self.framework, self.model)

    @property
    def label(self) -> str:
        return f"{self.platform}/{self.framework}"

    @property
    def ok_runs(self) -> list[LoadedResult]:
        return [r for r in self.runs if r.ok]

    @property
    def not_ok_runs(self) -> list[LoadedResult]:
        return [r for r in self.runs if not r.ok]

    def status_text(self) -> str:
        """``3 ok`` or ``2 ok, 1 failed``: failed/incomplete runs are never averaged in silently."""
        counts: dict[str, int] = defaultdict(int)
        for run in self.runs:
            counts[run.status] += 1
        return ", ".join(f"{counts[s]} {s}" for s in ("ok", "incomplete", "failed") if counts[s])


@dataclass
class LoadedDirectory:
    results: list[LoadedResult]
    skipped: list[tuple[Path, str]]

    def groups(self) -> dict[str, list[RunGroup]]:
        """Model -> run groups, in a stable order (AMD first, then NVIDIA, then CPU; frameworks alphabetical)."""
        by_key: dict[tuple[str, str, str], RunGroup] = {}
        for result in self.results:
            key = (result.platform, result.framework, result.model)
            by_key.setdefault(key, RunGroup(*key)).runs.append(result)
        out: dict[str, list[RunGroup]] = defaultdict(list)
        for key in sorted(by_key, key=lambda k: (k[2], PLATFORM_ORDER.get(k[0], 9), k[1])):
            group = by_key[key]
            group.runs.sort(key=lambda r: (r.run_index or 0, r.path.name))
            out[key[2]].append(group)
        return dict(out)


def _dict_view(result: Result) -> dict[str, Any]:
    """TEMPORARY shim until the readers of this package take the typed ``Result``: the JSON form of the
    result, with the fairness keys (``training_config.workload``) also beside ``training_config``'s other
    keys, where the readers written for schema version 1 look for them."""
    data = result.model_dump(mode="json")
    config = data["training_config"]
    workload = {key: value for key, value in config["workload"].items() if key != "unknown"}
    data["training_config"] = {**config, **workload}
    return data


def load_results(paths: list[Path]) -> LoadedDirectory:
    """Read and validate each file; invalid ones are returned in ``skipped`` with the reason."""
    results: list[LoadedResult] = []
    skipped: list[tuple[Path, str]] = []
    for path in sorted(paths):
        try:
            results.append(LoadedResult(path, _dict_view(read_result(path))))
        except ResultError as exc:
            skipped.append((path, str(exc)))
    return LoadedDirectory(results, skipped)


def find_result_files(directory: Path) -> list[Path]:
    """``train_*.json`` directly in ``directory`` (temp files of atomic writes start with a dot)."""
    return sorted(p for p in Path(directory).glob(RESULT_GLOB) if p.is_file())


def load_directory(directory: Path) -> LoadedDirectory:
    return load_results(find_result_files(directory))
