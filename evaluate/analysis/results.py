"""Loading a results directory: every ``train_*.json``, read through the one gate, grouped into repeated runs.

A result is foreign input: a file the gate (``utils.result.admit.admit``) refuses is named with its first problem
and left out, never a crash and never silent; the other files are compared.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from utils.io.sanitise import one_line, sanitised
from utils.measure.plausible import identity
from utils.result.admit import Refused, Unreadable, admit
from utils.result.file import STATUSES, ResultError
from utils.schema.model import Result
from utils.spec.registry import PLATFORMS

RESULT_GLOB = "train_*.json"
RUN_SUFFIX = re.compile(r"_r(\d+)$")


@dataclass(frozen=True)
class LoadedResult:
    """One valid result file: its path and the typed result."""

    path: Path
    result: Result

    @property
    def platform(self) -> str:
        return self.result.platform

    @property
    def framework(self) -> str:
        return self.result.framework

    @property
    def model(self) -> str:
        """The model key, or a MODEL_LAYERS proxy's label (``Llama 3.1 8B [8 of 32 layers]``), one bounded line: the one
        place the comparison names a model, so a proxy is grouped, tabled and plotted apart from the whole model."""
        shape = self.result.model_shape
        return one_line(shape.display_name) if shape.proxy_of_layers is not None else self.result.model

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str:
        """Short name for tables: the file name without ``train_``/``.json``, one line (it may hold a line break)."""
        stem = one_line(self.path.stem)
        return stem[len("train_"):] if stem.startswith("train_") else stem

    @property
    def profile(self) -> str:
        return self.result.profile

    @property
    def run_index(self) -> int | None:
        if self.result.run_index is not None:
            return self.result.run_index
        match = RUN_SUFFIX.search(self.path.stem)
        return int(match.group(1)) if match else None


@dataclass
class RunGroup:
    """All runs of one (platform, framework, model, profile): repeated runs aggregated, failures shown apart; the
    profile is part of the key, so an identical and a tuned run are never averaged together."""

    platform: str
    framework: str
    model: str
    profile: str = "identical"
    runs: list[LoadedResult] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.platform, self.framework, self.model, self.profile)

    @property
    def label(self) -> str:
        return f"{self.platform}/{self.framework}" + ("" if self.profile == "identical" else f" ({self.profile})")

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
        return ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])


def platform_rank(platform: str) -> int:
    """Position of ``platform`` in the registry (AMD, NVIDIA, CPU); unknown platforms go last."""
    order = list(PLATFORMS)
    return order.index(platform) if platform in order else len(order)


@dataclass
class LoadedDirectory:
    """The usable results and the skipped files (each with its one-line reason); ``unreadable``: the skipped
    files that are no readable regular file at all (the others were read and found invalid)."""

    results: list[LoadedResult]
    skipped: list[tuple[Path, str]]
    unreadable: set[Path] = field(default_factory=set)
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)  # (a copy, the file of the run it repeats)
    refused: list[LoadedResult] = field(default_factory=list)  # of ``skipped``: valid results that cannot be true

    def groups(self) -> dict[str, list[RunGroup]]:
        """Model -> run groups, in a stable order (profile identical first, registry platform order, frameworks)."""
        by_key: dict[tuple[str, str, str, str], RunGroup] = {}
        for result in self.results:
            key = (result.platform, result.framework, result.model, result.profile)
            by_key.setdefault(key, RunGroup(*key)).runs.append(result)
        out: dict[str, list[RunGroup]] = defaultdict(list)
        for key in sorted(by_key, key=lambda k: (k[2], k[3] != "identical", platform_rank(k[0]), k[1])):
            group = by_key[key]
            group.runs.sort(key=lambda r: (r.run_index or 0, r.path.name))
            out[key[2]].append(group)
        return dict(out)


def load_results(paths: list[Path]) -> LoadedDirectory:
    """Read each file through the gate; the refused ones are returned in ``skipped`` with the reason. A copy of a run
    already read (only its name, index or platform label differs) is counted once and listed in ``duplicates``."""
    loaded = LoadedDirectory([], [])
    seen: dict[str, Path] = {}
    for path in sorted(paths):
        try:
            result = sanitised(admit(path))  # every string one line and inert before any renderer sees it
        except ResultError as exc:
            if isinstance(exc, Unreadable):
                loaded.unreadable.add(path)
            elif isinstance(exc, Refused):  # validate still checks it in full
                loaded.refused.append(LoadedResult(path, sanitised(exc.result)))
            loaded.skipped.append((path, one_line(exc, 600)))
            continue
        key = identity(result)
        if key is not None and key in seen:
            loaded.duplicates.append((path, seen[key]))
            continue
        if key is not None:
            seen[key] = path
        loaded.results.append(LoadedResult(path, result))
    return loaded


def find_result_files(directory: Path) -> list[Path]:
    """Every ``train_*.json`` entry directly in ``directory`` (atomic writes' temporary names start with a dot)."""
    return sorted(Path(directory).glob(RESULT_GLOB))


def load_directory(directory: Path) -> LoadedDirectory:
    return load_results(find_result_files(directory))
