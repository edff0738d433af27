"""The machine and software a result ran on: its accelerators, environment, host settings, framework versions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from utils.schema.block import Block, Count, NonNegative, Positive


class PeakTflops(Block):
    """Dense peak TFLOP/s of one device, per precision (``None``: not tabulated)."""

    bf16: NonNegative | None = None
    fp8: NonNegative | None = None


class GpuInfo(Block):
    """The accelerators the run used (``utils/machine/hardware.py`` produces it)."""

    device_name: str | None
    device_count: Count
    total_memory_gb: NonNegative | None
    software_stack: Literal["cuda", "rocm", "cpu"]
    software_version: str | None
    pytorch_version: str | None
    driver_version: str | None
    peak_tflops: PeakTflops = Field(default_factory=PeakTflops)
    peak_tflops_reason: str | None = None
    peak_tflops_source: str | None = None
    cpu_name: str | None = None


class ImageInfo(Block):
    tag: str | None = None
    digest: str | None = None
    in_container: bool = False


class HostTunables(Block):
    """The host settings MLPerf submitters change, as read at the start (``utils/machine/host_tunables.py``).

    ``cstates``: CPU 0's idle states (``C6:off`` = disabled); ``cpu_governor``: every CPU's (counted when they differ).
    """

    cpu_governor: str | None = None
    cstates: str | None = None
    cpuidle_driver: str | None = None
    numa_balancing: str | None = None
    thp_enabled: str | None = None
    thp_defrag: str | None = None
    aslr: str | None = None
    nmi_watchdog: str | None = None
    cpu_boost: str | None = None
    unreadable: dict[str, str] = Field(default_factory=dict)


class SlurmJob(Block):
    """The Slurm job the run was part of (``utils/machine/slurm.py``); nodes x GPUs with ``training_config``."""

    job_id: Positive
    node_list: str
    nodes: Positive


class Environment(Block):
    """Performance-relevant variables and library versions (``utils/machine/environment.py``); never secrets."""

    variables: dict[str, str] = Field(default_factory=dict)
    launcher_set: dict[str, str] = Field(default_factory=dict)
    libraries: dict[str, str] = Field(default_factory=dict)
    python: str | None = None
    os: str | None = None
    hostname: str | None = None
    image: ImageInfo = Field(default_factory=ImageInfo)
    captured_by: str | None = None
    host_tunables: HostTunables | None = None
    slurm: SlurmJob | None = None  # None: not run as a Slurm job


class FrameworkVersions(Block):
    """The exact framework code the run executed; ``None`` with a reason in ``unknown`` where not known."""

    megatron_lm_commit: str | None = None
    megatron_core: str | None = None
    transformer_engine: str | None = None
    primus: str | None = None
    primus_commit: str | None = None
    nemo: str | None = None
    deepspeed: str | None = None
    transformers: str | None = None
    torch: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    unknown: dict[str, str] = Field(default_factory=dict)
