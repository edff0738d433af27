"""Fairness: are the results being compared the same workload?

Comparable only if the fairness table's keys (``train/settings/expected.py``), the profile, the precision, the model
shape, the data, tokenizer and FLOP fingerprints, the fed samples and the resolved schedule are identical. What is not
known proves nothing, so it is a difference ("cannot verify"), except where every result predates the record. Under
the tuned profile a run is fair when it records its vendor recipe and matches it (:func:`recipe_problems`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluate.analysis.results import LoadedResult
from evaluate.analysis.settings_diff import version_differences
from train.profiles.recipe import WORKLOAD_NAMES
from utils.dataset.sample_digest import DIGEST_KEY  # in effective_settings.settings
from utils.schema.model import Result
from utils.schema.run import HashedFiles, ModelShapeBlock, Workload

UNKNOWN = "unknown"
WORKLOAD_FIELDS = tuple(name for name in Workload.model_fields if name != "unknown")
SHAPE_KEY = "model_shape"
SHAPE_FIELDS_SHOWN = 4  # a full-vs-tiny difference touches every dimension; the first few say enough
# The workload keys a tuned recipe sets (the layout's derived DP and GA with them): they may differ between vendors.
RECIPE_KEYS = (*WORKLOAD_NAMES.values(), "DP", "GA")
RECIPE = "recipe"
TRANSFORMER_IMPL = "transformer_impl"  # Megatron's --transformer-impl as the framework resolved it (MEGATRON_IMPL)
# Fairness keys compared from each result's resolved settings (config.env spelling -> effective setting).
RESOLVED_KEYS = {"LR_DECAY_ITERS": "lr_decay_iters", "ADAM_EPS": "adam_eps"}


@dataclass(frozen=True)
class Value:
    """One compared value of one result, or why it is not known (``value`` is then None)."""

    value: Any
    unknown: str | None = None


@dataclass(frozen=True)
class Difference:
    """One key whose value is not the same (or not known) in every result of a model."""

    model: str
    key: str
    values: dict[str, Any]  # result label -> value (or "unknown (reason)")
    unverifiable: bool = False
    profile: str = "identical"

    def describe(self) -> str:
        shown = ", ".join(f"{label}={_short(value)}" for label, value in sorted(self.values.items()))
        prefix = "cannot verify" if self.unverifiable else "differs"
        if self.key == RECIPE:
            prefix = "cannot verify" if self.unverifiable else "does not match"
        where = self.model if self.profile == "identical" else f"{self.model}, {self.profile}"
        return f"[{where}] {self.key} {prefix}: {shown}"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "profile": self.profile, "key": self.key, "values": self.values,
                "unverifiable": self.unverifiable}


@dataclass
class FairnessReport:
    differences: list[Difference] = field(default_factory=list)
    compared: dict[str, list[str]] = field(default_factory=dict)  # model -> labels compared
    profiles: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # model -> profile -> labels
    recipes: dict[str, str] = field(default_factory=dict)  # label of a tuned result -> the recipe it ran

    @property
    def fair(self) -> bool:
        return not self.differences

    def _tuned_text(self) -> str:
        recipes = ", ".join(sorted(set(self.recipes.values()))) or "none recorded"
        return ("tuned runs each match their vendor recipe (" + recipes + ") with the same data, tokenizer, "
                "model shape, training algorithm, precision and FLOP convention; SL, batch sizes and layout are "
                "the recipes'")

    @property
    def checked(self) -> bool:
        """Whether two completed results of one model and profile were checked against each other at all."""
        return any(len(labels) >= 2 for by_profile in self.profiles.values() for labels in by_profile.values())

    def verdict(self) -> str:
        if not self.compared:
            return "no completed results to compare"
        counts = ", ".join(f"{model}: {len(labels)} result(s)" for model, labels in sorted(self.compared.items()))
        if not self.fair:
            return f"NOT FAIR: {len(self.differences)} difference(s) ({counts})"
        if not self.checked:
            return (f"NOTHING COMPARED: one completed result per model and profile, so no workload was checked "
                    f"against another ({counts})")
        kinds = {profile for by_profile in self.profiles.values() for profile in by_profile}
        same = "identical workload, data, tokenizer, model shape and FLOP convention"
        order = [kind for kind in ("identical", "tuned", "mlperf") if kind in kinds] + sorted(
            kinds - {"identical", "tuned", "mlperf"})
        parts = [self._tuned_text() if kind == "tuned" else f"{kind} profile: {same}" if len(kinds) > 1 else same
                 for kind in order]
        if len(kinds) > 1:
            parts[-1] += " (profiles compared apart, never mixed)"
        return f"FAIR: {'; '.join(parts)} ({counts})"

    def as_dict(self) -> dict[str, Any]:
        return {"fair": self.fair, "verdict": self.verdict(), "compared": self.compared, "profiles": self.profiles,
                "recipes": self.recipes, "differences": [d.as_dict() for d in self.differences]}


def _short(value: Any) -> str:
    text = str(value)
    if text.startswith("sha256:"):
        return text[: len("sha256:") + 12]
    return text


def _workload_value(workload: Workload, key: str) -> Value:
    value = getattr(workload, key)
    if value is None:
        return Value(None, workload.unknown.get(key) or "not recorded")
    return Value(value)


def _hash_value(part: HashedFiles | None, name: str) -> Value:
    if part is None:
        return Value(None, "result has no fingerprint")
    if part.hash:
        return Value(part.hash)
    return Value(None, part.reason or f"no {name} hash recorded")


def _resolved_value(result: Result, setting: str) -> Value:
    settings = result.effective_settings.settings if result.effective_settings is not None else {}
    value = settings.get(setting)
    if value is None:
        return Value(None, f"no {setting} in its effective settings")
    if isinstance(value, float):  # three parsers' 1e-05: compared to 12 significant digits
        return Value(float(f"{value:.12g}"))
    return Value(value)


def comparison_values(result: Result) -> dict[str, Value]:
    """Every value the fairness check compares, by the name a difference is reported under."""
    config = result.training_config
    values = {key: _workload_value(config.workload, key) for key in WORKLOAD_FIELDS}
    values["profile"] = Value(result.profile)
    values["precision_effective"] = (Value(config.precision_effective) if config.precision_effective
                                     else Value(None, "effective precision not recorded"))
    values[SHAPE_KEY] = Value(result.model_shape)
    fingerprint = result.fingerprint
    values["data hash"] = _hash_value(fingerprint.data if fingerprint else None, "data")
    values["tokenizer hash"] = _hash_value(fingerprint.tokenizer if fingerprint else None, "tokenizer")
    convention = fingerprint.flop_convention if fingerprint else None
    values["flop_convention"] = Value(convention) if convention else Value(
        None, "fingerprint has no flop_convention" if fingerprint else "result has no fingerprint")
    # time to quality: the evaluation settings and the held-out set, equal where both runs evaluated
    quality = result.quality
    values["evaluation"] = Value("off") if quality is None else Value(
        f"{quality.eval_samples} held-out samples every {quality.eval_interval_samples}, target "
        f"{'none' if quality.target_loss is None else f'{quality.target_loss:g}'}")
    if quality is None:
        values["validation data hash"] = Value("evaluation off")
    elif fingerprint is not None and fingerprint.valid_data is None:
        values["validation data hash"] = Value(None, "no validation data hash recorded")
    else:
        values["validation data hash"] = _hash_value(fingerprint.valid_data if fingerprint else None,
                                                     "validation data")
    values.update({key: _resolved_value(result, setting) for key, setting in RESOLVED_KEYS.items()})
    digest = result.effective_settings.settings.get(DIGEST_KEY) if result.effective_settings else None
    values[DIGEST_KEY] = Value(digest) if digest else Value(None, f"no {DIGEST_KEY} recorded")
    return values


def shape_differences(shapes: dict[str, ModelShapeBlock], shown: int = SHAPE_FIELDS_SHOWN) -> dict[str, str]:
    """Label -> the first ``shown`` shape fields that differ between the results (``num_layers=32, ...``)."""
    dumped = {label: shape.model_dump() for label, shape in shapes.items()}
    fields = [name for name in ModelShapeBlock.model_fields if len({repr(d[name]) for d in dumped.values()}) > 1]
    more = f" (+{len(fields) - shown} more)" if len(fields) > shown else ""
    return {label: ", ".join(f"{name}={d[name]}" for name in fields[:shown]) + more for label, d in dumped.items()}


def _compare_key(model: str, key: str, table: dict[str, dict[str, Value]], profile: str) -> Difference | None:
    column = {label: values[key] for label, values in table.items()}
    if any(v.unknown for v in column.values()):
        shown = {label: f"{UNKNOWN} ({v.unknown})" if v.unknown else v.value for label, v in column.items()}
        return Difference(model, key, shown, unverifiable=True, profile=profile)
    if len({repr(v.value) for v in column.values()}) == 1:
        return None
    if key == SHAPE_KEY:
        return Difference(model, key, shape_differences({label: v.value for label, v in column.items()}),
                          profile=profile)
    return Difference(model, key, {label: v.value for label, v in column.items()}, profile=profile)


def recipe_problems(result: Result) -> tuple[list[str], bool]:
    """Where a tuned result departs from the recipe it records (workload keys against ``training_config``, framework
    settings against ``effective_settings`` where recorded); (problems, unverifiable)."""
    block = result.profile_settings
    if block is None or block.recipe is None:
        return ["records no vendor recipe (profile_settings.recipe)"], True
    workload = result.training_config.workload
    resolved = result.effective_settings.settings if result.effective_settings is not None else {}
    problems = []
    for setting in block.settings:
        ran = getattr(workload, setting.key, None) if setting.key in RECIPE_KEYS else resolved.get(setting.key)
        if (setting.key in RECIPE_KEYS or setting.key in resolved) and ran != setting.tuned:
            problems.append(f"{setting.key}={ran!r} but recipe {block.recipe} states {setting.tuned!r}")
    return problems, False


def check_fairness(results: Iterable[LoadedResult]) -> FairnessReport:
    """Compare every ``ok`` result with the others of the same model and profile; list each difference."""
    by_group: dict[tuple[str, str], list[LoadedResult]] = defaultdict(list)
    for loaded in results:
        if loaded.ok:
            by_group[(loaded.model, loaded.profile)].append(loaded)
    report = FairnessReport()
    for (model, profile), group in sorted(by_group.items()):
        report.compared.setdefault(model, []).extend(r.label for r in group)
        report.profiles.setdefault(model, {})[profile] = [r.label for r in group]
        if profile == "tuned":
            for r in group:
                problems, unverifiable = recipe_problems(r.result)
                if problems:
                    report.differences.append(Difference(model, RECIPE, {r.label: "; ".join(problems)},
                                                         unverifiable=unverifiable, profile=profile))
                elif r.result.profile_settings and r.result.profile_settings.recipe:
                    report.recipes[r.label] = r.result.profile_settings.recipe
        if len(group) < 2:
            continue  # nothing to compare a lone result with
        table = {r.label: comparison_values(r.result) for r in group}
        # A tuned recipe's own SL and batches make other samples; results that all predate the digest have none.
        skipped = (*RECIPE_KEYS, DIGEST_KEY) if profile == "tuned" else ()
        # results that all predate a resolved key (or the digest) are judged without it
        skipped = (*skipped, *(key for key in (*RESOLVED_KEYS, DIGEST_KEY)
                               if all(values[key].unknown for values in table.values())))
        for key in next(iter(table.values())):
            difference = None if key in skipped else _compare_key(model, key, table, profile)
            if difference is not None:
                report.differences.append(difference)
        for key, column in version_differences(group).items():
            unknown = any(value.startswith("unknown (") for value in column.values())
            report.differences.append(Difference(model, key, column, unverifiable=unknown, profile=profile))
        impl = implementation_difference(model, group, profile)
        if impl is not None:
            report.differences.append(impl)
    return report


def implementation_difference(model: str, group: list[LoadedResult], profile: str) -> Difference | None:
    """Megatron's Transformer Engine layers against its local ones (``MEGATRON_IMPL``, recorded by mega and prim):
    not like-for-like."""
    column = {r.label: r.result.effective_settings.settings[TRANSFORMER_IMPL] for r in group
              if r.result.effective_settings is not None and TRANSFORMER_IMPL in r.result.effective_settings.settings}
    if len(set(map(repr, column.values()))) < 2:
        return None
    return Difference(model, f"{TRANSFORMER_IMPL} (Megatron's implementation: not like-for-like)", column,
                      profile=profile)
