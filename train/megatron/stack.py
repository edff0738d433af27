"""What ``mega`` and ``prim`` do alike around their own launch: the job's inputs checked, the probe asked.

Only the command, the tree and the probe's own request keys differ, so each plugin names those and leaves the rest
here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.launch.contract import LaunchPlan, Resolution, RunContext
from train.megatron.args import VocabPadding
from train.megatron.inputs import missing_data, model_inputs
from train.megatron.record import megatron_record
from train.megatron.trees import GPU_ARCH, MEGATRON_PYTHON
from train.settings.runner import ProbeAnswer, python_for, run_probe
from train.settings.samples import SampleSource, done_with, pending_samples
from utils.dataset.framework_tokenizer import framework_tokenizer
from utils.spec.models import ModelShape


@dataclass(frozen=True)
class JobInputs:
    """A Megatron job's inputs: the data prefix, the tokenizer the framework is given, shape, padding, notes."""

    prefix: Path
    tokenizer: Path  # utils/dataset/framework_tokenizer.py: the model's, or a copy naming no pad
    shape: ModelShape
    padding: VocabPadding
    notes: list[str]


def job_inputs(ctx: RunContext, framework_problem: str | None) -> JobInputs:
    """The job's inputs, checked: a missing framework (``framework_problem``) or dataset stops a real run
    with a ``FileNotFoundError``; a dry run carries each as a note and writes nothing."""
    shape, padding = model_inputs(ctx)
    notes = [padding.note()]
    problems = [p for p in (framework_problem, missing_data(ctx.data)) if p is not None]
    if problems and not ctx.dry_run:
        raise FileNotFoundError("; ".join(problems))
    notes += [f"{problem} (a real run stops here)" for problem in problems]
    given, pad_note = framework_tokenizer(ctx.data.tokenizer_dir, ctx.cfg.output_dir, write=not ctx.dry_run)
    notes += [pad_note] if pad_note else []
    return JobInputs(ctx.data.prefix, given, shape, padding, notes)


def ask_probe(ctx: RunContext, plan: LaunchPlan, probe: str, stack: str, request: dict[str, Any],
              resolved_by: Callable[[ProbeAnswer], str], dataset_code: Path) -> Resolution:
    """Run ``probe`` (a module) in the Megatron Python on ``request`` plus what every Megatron probe needs, and
    read its answer as the flat record; ``resolved_by`` words who answered, ``dataset_code`` is the Megatron
    tree whose dataset code the sample digest runs."""
    _, padding = model_inputs(ctx)
    python = python_for(MEGATRON_PYTHON)
    request = {**request, "world_size": ctx.cfg.world_size, "env": plan.env,
               "tokenizer_size": padding.tokenizer_size, "device_arch": GPU_ARCH[ctx.platform]}
    # The framework's own first samples in the same Python, where their digest is not stored yet (issue 38).
    pending = pending_samples(ctx.cfg, ctx.data, ctx.framework, python, dataset_code)
    if pending is not None:
        request["samples"] = [pending.request]
    try:
        answer = run_probe(probe, request, python, stack)
    except BaseException:
        done_with(pending)
        raise
    payload = answer.payload
    record = megatron_record(answer.raw, payload.get("padded_vocab_size"), payload.get("lr_by_step"),
                             payload.get("transformer_config"))
    return Resolution(record, resolved_by(answer), list(payload.get("stand_ins") or []),
                      planned_vocab=padding.padded,
                      samples=SampleSource(answer.python, dataset_code, pending.out if pending is not None else None,
                                           payload.get("samples_error") if pending is not None else None))
