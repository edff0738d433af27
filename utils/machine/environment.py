"""Environment capture: the variables and library versions that change performance.

Recorded in every result so a surprising number can be traced to, say, a different ``NCCL_ALGO``; never a variable
named like a credential.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from utils.config.load import CONTAINER_MARKER, in_tprimat_container
from utils.machine.host_tunables import read_host_tunables
from utils.machine.slurm import slurm_job

RELEVANT_PREFIXES = (
    "HSA_", "HIP_", "ROCM_", "ROCR_", "NCCL_", "RCCL_", "NVTE_", "CUDA_", "PYTORCH_", "TORCH_",
    "OMP_", "MIOPEN_", "GPU_MAX_HW_QUEUES", "TORCHINDUCTOR_", "PRIMUS_", "MEGATRON_",
)
SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")
LIBRARIES = (
    "torch", "transformers", "tokenizers", "datasets", "megatron-core", "transformer-engine",
    "transformer_engine", "nemo-toolkit", "nemo_toolkit", "lightning", "pytorch-lightning", "primus",
    "flash-attn", "flash_attn", "apex", "numpy", "deepspeed",
)


def relevant_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Performance-relevant environment variables, secrets excluded."""
    env = os.environ if environ is None else environ
    return {
        key: value
        for key, value in sorted(env.items())
        if key.startswith(RELEVANT_PREFIXES) and not any(m in key.upper() for m in SECRET_MARKERS)
    }


def installed_version(name: str) -> str | None:
    """The installed distribution ``name``'s version from its metadata (nothing is imported); None when absent."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_versions(names: Iterable[str]) -> dict[str, str | None]:
    """:func:`installed_version` of each of ``names``, absent ones as None (what a manifest or a key records)."""
    return {name: installed_version(name) for name in names}


def library_versions() -> dict[str, str]:
    """The installed ones of :data:`LIBRARIES` (an absent library is left out of the result's environment)."""
    return {name: version for name, version in installed_versions(LIBRARIES).items() if version is not None}


def container_image(environ: Mapping[str, str] | None = None) -> dict[str, str | bool | None]:
    """Image tag/digest when the orchestration passed them in (TPRIMAT_IMAGE, TPRIMAT_IMAGE_DIGEST)."""
    env = os.environ if environ is None else environ
    return {
        "tag": env.get("TPRIMAT_IMAGE") or None,
        "digest": env.get("TPRIMAT_IMAGE_DIGEST") or None,
        "in_container": in_tprimat_container(env),
    }


def capture_environment(
    launcher_env: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Snapshot for a result: relevant variables, versions, image; ``launcher_env`` (what a launcher set for its
    child) is kept apart, so a reader sees what tprimat chose versus what was inherited."""
    merged = {**(os.environ if environ is None else environ), **(launcher_env or {})}
    return {
        "variables": relevant_environment(merged),
        "launcher_set": relevant_environment(launcher_env or {}),
        "libraries": library_versions(),
        "python": sys.version.split()[0],
        "os": platform.platform(),
        "hostname": platform.node(),
        "image": container_image(environ),
        "host_tunables": read_host_tunables(),  # record only (issue 35): governor, NUMA balancing, THP, ASLR ...
        "slurm": slurm_job(environ),  # the Slurm job (issue 51): id, node list, nodes
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.machine.environment",
        description="Answer questions about the running environment for the shell scripts.",
    )
    parser.add_argument("--in-container", action="store_true", required=True,
                        help=f"exit 0 inside a tprimat image ({CONTAINER_MARKER}=1), 1 elsewhere")
    parser.parse_args(argv)
    return 0 if in_tprimat_container() else 1


if __name__ == "__main__":
    sys.exit(main())
