"""What the checks before a launch find, in one place: memory, rendezvous port, dataset, evaluation cadence.

:func:`check_start` runs them all for a planned job and returns its :class:`Findings`: the problems that stop a real
run, the warnings it prints, and for the dry run the notes it shows instead (what a real run would do). The memory
check (:func:`check_memory`) sizes the job (``utils/measure/memory.py``) from the plugin's
:meth:`~train.launch.contract.Plugin.memory` recipe, the workload and the GPU: the dry run prints the estimate, a
job that cannot fit is refused in one line naming both numbers (``--force`` runs it, warned), an unknown GPU is a
``null`` with a reason. :class:`Checked` and :class:`Refusal` are what ``check_job`` decides
(``train/launch/launcher.py``) and ``train/launch/job_result.py`` records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from data.ready import dataset_problem
from train.launch.contract import LaunchPlan, Plugin, RunContext
from train.settings.samples import dry_run_note
from utils.config.model import Config
from utils.machine.rendezvous import port_problem
from utils.measure.memory import MemoryCheck, memory_check
from utils.measure.quality import evaluation_note, interval_warning
from utils.schema.hardware import FrameworkVersions
from utils.schema.run import EffectiveSettings


def binds_master_port(cfg: Config, argv: list[str], env: dict[str, str]) -> bool:
    """Does this plan's node 0 bind MASTER_PORT, which must then be free before the start: torchrun's rendezvous
    flag (``train/launch/torchrun.py`` ``torchrun_argv``), or a worker started by its ``worker_argv`` without torchrun
    (its process group's store listens there)."""
    return (f"--master-port={cfg.master_port}" in argv
            or (env.get("ROLE_WORLD_SIZE") == "1" and env.get("MASTER_PORT") == str(cfg.master_port)))


def check_memory(ctx: RunContext, plugin: Plugin, plan: LaunchPlan, force: bool = False) -> MemoryCheck:
    """The estimate of ``ctx``'s job on its platform's GPU, and the verdict (refuse, or go with warnings)."""
    # A plugin without memory() (the test suite's stand-ins) is sized as the framework it stands in for.
    own = getattr(plugin, "memory", None)
    return memory_check(ctx.framework, ctx.shape, ctx.cfg, ctx.platform, own(ctx, plan) if own is not None else None,
                        force)


@dataclass(frozen=True)
class Findings:
    """What the checks before the start found: the memory check; why a real run must not start (None: it may),
    in one line; the lines it prints (every warning, then what refuses it); in a dry run, the notes it shows."""

    memory: MemoryCheck
    refusal: str | None
    said: list[str]
    notes: list[str]


def check_start(ctx: RunContext, plugin: Plugin, plan: LaunchPlan) -> Findings:
    """Every check of a planned job before it starts, each once: memory (first: ``--force`` passes it), the port
    node 0 binds and the dataset (each problem its own line, one refusal), the evaluation cadence (a warning); the
    dry run's notes besides: what a real run would do, the samples digest, the evaluation."""
    binds_port = ctx.cfg.node_rank == 0 and binds_master_port(ctx.cfg, plan.argv, plan.env)  # which checks apply
    memory = check_memory(ctx, plugin, plan, ctx.force)
    found = [port_problem(ctx.cfg.master_port) if binds_port else None,
             dataset_problem(ctx.cfg, ctx.model) if plan.reads_dataset else None]
    problems = [problem for problem in found if problem]
    interval = [warning for warning in [interval_warning(ctx.cfg)] if warning]  # issue 34
    evaluation = evaluation_note(ctx.cfg)
    notes = []
    if ctx.dry_run:
        digest = [note for note in [dry_run_note(ctx.cfg, ctx.data)] if note]
        notes = [*(f"{problem} (a real run stops here)" for problem in problems), memory.dry_run_note(), *digest,
                 evaluation, *interval]
    refusal = memory.verdict.refusal
    said = [*(f"warning: {warning}" for warning in [*memory.verdict.warnings, *interval]),
            *([f"{refusal} (--force runs it anyway)"] if refusal else problems)]
    return Findings(memory, refusal or "; ".join(problems) or None, said, notes)


@dataclass(frozen=True)
class Checked:
    """A job the checks let start: its plan and memory check; in a dry run, the notes the checks add to the
    plan; in a real run, the preflight's record and the framework versions."""

    plan: LaunchPlan
    memory: MemoryCheck
    notes: list[str] = field(default_factory=list)
    settings: tuple[EffectiveSettings, FrameworkVersions] | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a job must not start, in one line: ``failed``, or ``incomplete`` when a signal came first; the memory
    check when it ran (its estimate and warnings are recorded all the same)."""

    reason: str
    status: str = "failed"
    memory: MemoryCheck | None = None
