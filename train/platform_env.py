"""The environment each launcher sets, per platform: one documented place.

Every variable here changes performance or correctness, so every one is recorded
in the result (``environment.launcher_set``). Values already present in the
caller's environment win, so a user can still experiment (``NCCL_ALGO=Ring ...``)
and the result shows what actually ran.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Settings common to every framework on a platform. Why each is set:
PLATFORM_ENV: dict[str, dict[str, str]] = {
    "nvd": {
        # Megatron/TE overlap communication with compute only when kernels queue in order.
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        # Transformer Engine attention backends: cuDNN fused attention and flash attention allowed.
        "NVTE_FUSED_ATTN": "1",
        "NVTE_FLASH_ATTN": "1",
        # Fewer allocator retries on long runs; the same choice NVIDIA's recipes make.
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        # Fail fast instead of hanging on a collective error, so the result records it.
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    },
    "amd": {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        # Avoid scratch-memory reclaim stalls between kernels (AMD's recommended training setting).
        "HSA_NO_SCRATCH_RECLAIM": "1",
        # Use the SDMA engines for host<->device copies.
        "HSA_ENABLE_SDMA": "1",
        # Same allocator policy as on NVIDIA (HIP reads the PYTORCH_HIP_ prefix).
        "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    },
    # cpu: the tran launcher sets OMP_NUM_THREADS from the core count and the process count.
    "cpu": {},
}


def launcher_env(platform: str, extra: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables to set for ``platform`` (plus framework ``extra``); the caller's environment wins."""
    if platform not in PLATFORM_ENV:
        raise ValueError(f"platform {platform!r}: allowed values are {', '.join(PLATFORM_ENV)}")
    env = os.environ if environ is None else environ
    wanted = {**PLATFORM_ENV[platform], **(extra or {})}
    return {key: env.get(key, value) for key, value in wanted.items()}
