"""The plugin contract: what the launcher gives a framework and what a framework gives back.

Every framework is one package under ``train/`` (``tran``, ``deep``, ``mega``, ``prim``,
``nemo``) whose ``plugin`` module, named in ``utils/spec/registry.py``, provides :class:`Plugin`.
The shared rooms (``train/launch/launcher.py``, ``train/launch/preflight.py``, ``train/launch/job_result.py``,
the fairness table ``train/settings/expected.py``, the LR schedule ``train/rules/schedule.py``) know
frameworks only through this module, so a sixth framework is one new package plus one
registry row. This module imports no framework and nothing of the launcher: what it needs of the
launcher's objects is said here as a protocol (:class:`ResultSlot`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from train.profiles import IDENTICAL, AppliedProfile
from train.settings.samples import SampleSource
from utils.config.model import Config
from utils.dataset.paths import JobData
from utils.machine.cpu_precision import PrecisionChoice
from utils.measure.memory import Recipe
from utils.schema.hardware import FrameworkVersions
from utils.schema.model import Result
from utils.schema.run import EffectiveSettings
from utils.spec.shape import ModelShape


class ResultSlot(Protocol):
    """The job's result file while it runs, as a plugin sees it (``utils/files/result_file.py``'s ``ResultFile``)."""

    def is_placeholder(self) -> bool:
        """True while the file still holds the launcher's placeholder: the job itself wrote no result."""
        ...


@dataclass(frozen=True)
class RunContext:
    """Everything a plugin needs to plan and collect one job."""

    cfg: Config
    platform: str
    framework: str
    model: str
    run_index: int | None
    result_path: Path
    log_path: Path
    # The job's encoded sets and tokenizer, resolved once from ``cfg`` and ``model`` (utils/dataset/paths.py).
    data: JobData
    # The model as the job trains it (MODEL_SIZE, MODEL_LAYERS: utils/spec/models.py ``workload_shape``), resolved
    # once: the memory check, the preflight's expected settings and the result read this one.
    shape: ModelShape
    # True while planning for --dry-run: a plugin may then report missing inputs as notes, not errors.
    dry_run: bool = False
    # The result file while the job runs (set by the launcher): tells the job's own result from the placeholder.
    result_file: ResultSlot | None = field(default=None, compare=False)
    # PROFILE as applied to this job (train/profiles/): ``cfg`` already carries a tuned recipe's workload.
    profile: AppliedProfile = IDENTICAL
    # --force: a job the memory check says cannot fit runs anyway, with the warning in its result.
    force: bool = False
    # cpu only: the precision the job computes in and why (utils/machine/cpu_precision.py); ``cfg`` already has it.
    precision: PrecisionChoice | None = None


@dataclass(eq=False)
class PreflightError(RuntimeError):
    """The job would not run the fairness table's settings, or the framework refuses it. One line, and the
    setting with both values where one setting differs."""

    message: str
    setting: str | None = None
    expected: Any = None
    effective: Any = None

    def __post_init__(self) -> None:
        super().__init__(self.message)


@dataclass
class LaunchPlan:
    """What will run: exact argv, the environment it adds, files it needs written first."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    files: dict[Path, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Where the command writes its own output besides stdout (e.g. Primus's TRAIN_LOG).
    extra_logs: list[Path] = field(default_factory=list)
    # Whether the command reads the job's dataset, which is then checked first (data/ready.py);
    # False only for commands that read none (the test suite's stand-ins).
    reads_dataset: bool = True
    # The profile's settings with their sources (train/profiles/), shown by --dry-run.
    profile: list[str] = field(default_factory=list)
    # The worker script that takes Megatron's graceful-stop SIGTERM (--exit-signal-handler) when an evaluation
    # reaches TARGET_LOSS (train/launch/target_watch.py); None: the launcher never watches the job's evaluations.
    stop_script: str | None = None

    def render(self) -> str:
        """Human-readable dry-run text: command, environment, generated files."""
        lines = ["# command", shlex.join(self.argv), ""]
        if self.cwd:
            lines += ["# working directory", str(self.cwd), ""]
        lines.append("# environment set by tprimat")
        lines += [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())] or ["(none)"]
        for path, text in self.files.items():
            lines += ["", f"# generated file: {path}", text.rstrip("\n")]
        for note in self.notes:
            lines += ["", f"# note: {note}"]
        if self.profile:
            lines += ["", "# profile"] + [f"# {line}" for line in self.profile]
        return "\n".join(lines) + "\n"

    def generated(self, suffix: str) -> tuple[Path, str]:
        """The generated file whose name ends in ``suffix`` and its text (what a resolver feeds the framework)."""
        for path, text in self.files.items():
            if str(path).endswith(suffix):
                return path, text
        raise PreflightError(f"the launch plan has no generated *{suffix} file to check")

    def args_after(self, script: str) -> list[str]:
        """The arguments the plan passes to ``script`` (e.g. ``pretrain_gpt.py``)."""
        for index, word in enumerate(self.argv):
            if word.endswith(script):
                return self.argv[index + 1:]
        raise PreflightError(f"the launch plan does not run {script}: {' '.join(self.argv[:6])} ...")


@dataclass
class Resolution:
    """A framework's effective settings for one job, as its own code resolved them (``train/launch/preflight.py``)."""

    # One flat record with the fairness table's keys (train/settings/expected.py).
    record: dict[str, Any]
    # Who resolved it, with versions and paths: stored in the result beside the record.
    resolved_by: str
    # What stood in for something this host lacks (a GPU's architecture, Transformer Engine), said in resolved_by.
    notes: list[str] = field(default_factory=list)
    # The padded vocabulary the plan gives the model, which the fairness table's expected values are computed
    # with, for a framework whose own code resolved the record (mega, prim, nemo); None where the record is
    # tprimat's configuration itself (tran, deep), which has no second opinion to be checked against.
    planned_vocab: int | None = None
    # Where the framework's own dataset code builds the job's first samples, for the fed-sample digest
    # (train/settings/samples.py); None: tran's reference samples are the job's.
    samples: SampleSource | None = None


# A job's settings checked before it starts: (the record stored as ``effective_settings``, the framework versions);
# raises PreflightError with one line.
Preflight = Callable[["RunContext", "LaunchPlan"], tuple[EffectiveSettings, FrameworkVersions]]


class Plugin(Protocol):
    """What a framework's ``plugin`` module provides (module-level functions, and ``preflight``)."""

    # The check of the job's settings before it starts. None, as every registered framework declares: the
    # standard preflight, train/launch/preflight.py's ``before_launch`` (this plugin's ``resolve`` against
    # config.env and the fairness table, and ``framework_trees``' versions). A function replaces it where there is
    # no framework to ask (the test suite's stand-ins).
    preflight: Preflight | None

    def plan(self, ctx: RunContext) -> LaunchPlan:
        """The exact command, its environment and the files it needs; pure, so ``--dry-run`` can show it."""
        ...

    def collect(self, ctx: RunContext, plan: LaunchPlan, returncode: int) -> Result | None:
        """The typed result after the process ended (the trainer's own file, or its log read back)."""
        ...

    def resolve(self, ctx: RunContext, plan: LaunchPlan) -> Resolution:
        """The job's effective settings from the framework's own code (raises ``PreflightError``,
        ``train.settings.runner.FrameworkRejected`` or ``FrameworkUnavailable``)."""
        ...

    def framework_trees(self, ctx: RunContext) -> tuple[Path | None, Path | None]:
        """(Megatron-LM tree, Primus tree) the job runs, for ``train/rules/versions.py``; None where none."""
        ...

    def memory(self, ctx: RunContext, plan: LaunchPlan) -> Recipe:
        """How the job holds the model (sharding, precision, kernels), for train/launch/checks.py."""
        ...
