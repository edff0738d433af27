"""The settings and framework versions that differ between the results of one comparison.

Only the keys of the resolved ``effective_settings`` (train/launch/preflight.py) whose values differ; and
:func:`version_differences`: two results of one framework on different code measure two versions, not two GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from evaluate.analysis.results import LoadedResult
from utils.schema.block import Scalar
from utils.schema.hardware import FrameworkVersions
from utils.spec.registry import FRAMEWORKS

ABSENT = "-"

@dataclass(frozen=True)
class SettingDifference:
    """One effective setting whose value is not the same in every compared result of a model."""

    model: str
    key: str
    values: dict[str, Scalar | str]  # result label -> value (ABSENT where the result has no such key)

    @property
    def shared(self) -> bool:
        """Every compared result has this setting (a real difference, not one framework's own knob)."""
        return ABSENT not in self.values.values()


def settings_differences(results: Iterable[LoadedResult]) -> list[SettingDifference]:
    """Per model, the effective settings that differ between the ``ok`` results that recorded them (a key only some
    have: when two have it and differ, or one has it and another recorded the block without it)."""
    by_model: dict[str, list[LoadedResult]] = defaultdict(list)
    for loaded in results:
        if loaded.ok and loaded.result.effective_settings is not None:
            by_model[loaded.model].append(loaded)
    found: list[SettingDifference] = []
    for model, group in sorted(by_model.items()):
        if len(group) < 2:
            continue
        settings = {r.label: r.result.effective_settings.settings for r in group}  # type: ignore[union-attr]
        keys = sorted({key for values in settings.values() for key in values})
        for key in keys:
            column = {label: values.get(key, ABSENT) for label, values in settings.items()}
            if len({repr(value) for value in column.values()}) > 1:
                found.append(SettingDifference(model, key, column))
    return found


def version_differences(group: list[LoadedResult]) -> dict[str, dict[str, str]]:
    """``framework_versions.<field> (<framework>)`` -> {label: version} where results of one framework differ; an
    unknown version is a difference (it cannot prove the same code ran), results recording no versions are left out."""
    by_framework: dict[str, list[LoadedResult]] = defaultdict(list)
    for loaded in group:
        by_framework[loaded.framework].append(loaded)
    found: dict[str, dict[str, str]] = {}
    for framework, runs in sorted(by_framework.items()):
        runs = [run for run in runs if run.result.framework_versions != FrameworkVersions()]
        if len(runs) < 2:
            continue
        fields = FRAMEWORKS[framework].version_fields if framework in FRAMEWORKS else ()
        for field in fields:
            column: dict[str, str] = {}
            for run in runs:
                versions = run.result.framework_versions
                value = getattr(versions, field)
                column[run.label] = value if value is not None else (
                    f"unknown ({versions.unknown.get(field, 'not recorded')})")
            if len(set(column.values())) > 1 or any(v.startswith("unknown (") for v in column.values()):
                found[f"framework_versions.{field} ({framework})"] = column
    return found
