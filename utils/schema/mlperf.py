"""MLPerf: a ``PROFILE=mlperf`` run's MLLOG and MLPerf's compliance verdict on it (issue 35; ``utils/result/mllog.py``
produces the block), and a published MLPerf run imported (issue 48)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from utils.schema.block import Block, Count, NonNegative, Positive


class MlperfCheck(Block):
    """MLPerf's compliance checker on the run's MLLOG for one ruleset: its verdict and its own messages.

    ``verdict`` is the checker's last line (SUCCESS or FAILED); None with ``reason`` when it did not finish.
    """

    ruleset: str
    verdict: Literal["SUCCESS", "FAILED"] | None
    messages: list[str] = Field(default_factory=list)
    reason: str | None = None


class MlperfRcp(Block):
    """What mlperf-logging's reference convergence points say about the run's GBS (``kind``: point, interpolated
    between points, or none), with the point's learning rate and warm-up samples where there is one."""

    gbs: Positive | None
    kind: Literal["point", "interpolated", "none"]
    source: str
    base_lr: NonNegative | None = None
    warmup_samples: Count | None = None
    note: str = ""


class Mlperf(Block):
    """A ``PROFILE=mlperf`` run's MLLOG (a file beside the result) and the checker's verdict on it.

    ``verdict`` is the ruleset of record's (``ruleset_of_record``, 6.0.0); ``checks`` holds every
    ruleset run. None with ``reason`` when no MLLOG could be written (no quality block, no
    mlperf-logging). ``derived_from`` says who wrote the MLLOG and from what.
    """

    benchmark: str
    derived_from: str
    not_a_submission: str
    checker: str | None = None
    ruleset_of_record: str | None = None
    mllog: str | None = None
    verdict: Literal["SUCCESS", "FAILED"] | None = None
    checks: list[MlperfCheck] = Field(default_factory=list)
    rcp: MlperfRcp | None = None
    reason: str | None = None


class Published(Block):
    """A run someone else measured and published: an MLPerf Training submission's run (the MLPerf importer, issue 48).

    Never tprimat's measurement: such a result's ``framework`` is :data:`PUBLISHED_FRAMEWORK` (the submitter's
    framework is ``framework`` here, as its system description states it), its ``source.kind`` is ``mlperf`` and
    ``log`` is the run's place inside the results repository, never a path of the machine that imported it.
    ``score_min`` is MLPerf's score of the whole system (the olympic mean of its counted runs' minutes, times
    ``scaling_factor``), the same in each of its runs; ``counted`` says whether this run enters it, and why not.
    ``check`` is MLPerf's compliance checker's verdict on the log, None with ``check_reason`` when not run.
    """

    origin: str
    round: str
    submitter: str
    system: str
    system_id: str
    benchmark: str
    division: str
    availability: str
    accelerator: str
    nodes: Positive
    accelerators_per_node: Positive
    framework: str
    notes: str = ""
    log: str
    log_sha256: str
    run_status: str | None = None
    counted: bool
    counted_reason: str = ""
    score_min: NonNegative | None = None
    score_reason: str | None = None
    scaling_factor: NonNegative | None = None
    rcp: str | None = None
    check: Literal["SUCCESS", "FAILED"] | None = None
    check_reason: str | None = None
