"""What the checks before a launch find: the memory check, and the verdict a job starts or stops with.

:func:`check_memory` sizes the job (``utils/measure/memory.py``) from the plugin's
:meth:`~train.launch.contract.Plugin.memory` recipe, the workload and the GPU: the dry run prints the estimate, a
job that cannot fit is refused in one line naming both numbers (``--force`` runs it, warned), an unknown GPU is a
``null`` with a reason. :class:`Checked` and :class:`Refusal` are what ``check_job`` decides
(``train/launch/launcher.py``) and ``train/launch/job_result.py`` records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from train.launch.contract import LaunchPlan, Plugin, RunContext
from utils.machine.hardware import device_memory
from utils.measure.memory import Estimate, Verdict, estimate, recipe_for, verdict
from utils.schema.hardware import FrameworkVersions
from utils.schema.measures import MemoryEstimate
from utils.schema.run import EffectiveSettings
from utils.spec.models import workload_shape


@dataclass(frozen=True)
class MemoryCheck:
    """One job's estimate and what the launcher does with it."""

    estimate: Estimate
    verdict: Verdict
    forced: bool

    @property
    def record(self) -> MemoryEstimate:
        return self.estimate.record(forced=self.forced and self.verdict.refusal is None and self.estimate.fits is False)

    def dry_run_note(self) -> str:
        """The dry run's line: the estimate, and what a real run would do with it."""
        if self.verdict.refusal:
            return f"memory: {self.verdict.refusal} (a real run refuses it; --force runs it anyway)"
        said = "; ".join(self.verdict.warnings) or self.estimate.line()
        return f"memory: {said}"


def check_memory(ctx: RunContext, plugin: Plugin, plan: LaunchPlan, force: bool = False) -> MemoryCheck:
    """The estimate of ``ctx``'s job on its platform's GPU, and the verdict (refuse, or go with warnings)."""
    # A plugin without memory() (the test suite's stand-ins) is sized as the framework it stands in for.
    own = getattr(plugin, "memory", None)
    recipe = own(ctx, plan) if own is not None else recipe_for(ctx.framework, ctx.cfg)
    shape = workload_shape(ctx.cfg, ctx.model)
    result = estimate(shape, ctx.cfg, recipe, device_memory(ctx.platform))
    return MemoryCheck(result, verdict(result, force=force), force)


@dataclass(frozen=True)
class Checked:
    """A job the checks let start: its plan and memory check; in a dry run, the port and dataset problems it
    shows as notes; in a real run, the preflight's record and the framework versions."""

    plan: LaunchPlan
    memory: MemoryCheck
    problems: list[str] = field(default_factory=list)
    settings: tuple[EffectiveSettings, FrameworkVersions] | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a job must not start, in one line: ``failed``, or ``incomplete`` when a signal came first; the memory
    check when it ran (its estimate and warnings are recorded all the same)."""

    reason: str
    status: str = "failed"
    memory: MemoryCheck | None = None
