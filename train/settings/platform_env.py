"""The environment each launcher sets, per platform: one documented place.

Every framework on a platform starts from the same variables, so two frameworks differ in their code, not in
communication or allocator settings; a value already in the caller's environment wins. Sources: Primus's
``examples/run_pretrain.sh`` (``rocm/primus:v25.11``) and ``runner/helpers/envs/base_env.sh``, ROCm Megatron-LM's
``examples/llama/train_llama3.sh``, NVIDIA's Megatron-LM Llama 3 example and NeMo's performance recipes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Settings common to every framework on a platform. Why each is set:
PLATFORM_ENV: dict[str, dict[str, str]] = {
    "nvd": {
        # Megatron/TE overlap communication with compute only when kernels queue in order
        # (required by sequence parallelism and TP communication overlap).
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        # Fewer allocator retries and less fragmentation on long runs.
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        # NeMo's performance recipes: free NCCL buffers without record_stream bookkeeping.
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        # Fail fast instead of hanging on a collective error, so the result records it.
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        # Data-loader workers fork after the HF tokenizer was used; its thread pool must not be
        # inherited (NeMo's launcher set this alone; now every framework on the platform does).
        "TOKENIZERS_PARALLELISM": "false",
    },
    "amd": {
        # Same reason as on NVIDIA; Primus and ROCm Megatron set it too.
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        # Keep scratch memory between kernels instead of reclaiming it (avoids stalls; AMD's
        # dense-training default in ROCm Megatron and in current Primus).
        "HSA_NO_SCRATCH_RECLAIM": "1",
        # Use the SDMA engines for host<->device copies (Primus sets 1).
        "HSA_ENABLE_SDMA": "1",
        # Two hardware queues per device: AMD's setting for stable training throughput.
        "GPU_MAX_HW_QUEUES": "2",
        # Give RCCL's streams high priority so communication overlaps compute.
        "TORCH_NCCL_HIGH_PRIORITY": "1",
        # Skip RCCL's argument checks on every collective (overhead only).
        "NCCL_CHECKS_DISABLE": "1",
        # MSCCL algorithms off, as Primus and ROCm Megatron do, for stability.
        "RCCL_MSCCL_ENABLE": "0",
        # CK flash-attention backward "v3" kernels off: the Primus release in the pinned image
        # disables them for accuracy; set here so mega and prim on AMD run the same kernels.
        "NVTE_CK_USES_BWD_V3": "0",
        # Same allocator policy as on NVIDIA (HIP reads the PYTORCH_HIP_ prefix).
        "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # The rest of Primus v0.5.0's examples/run_pretrain.sh, so mega on AMD runs prim's communication and
        # kernel settings (tests/conformance checks this table against that script).
        "RCCL_MSCCLPP_ENABLE": "0",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_CROSS_NIC": "0",
        "NCCL_PXN_DISABLE": "1",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        # ROCm Transformer Engine: Triton cast-transpose kernels for FP8 casts (the hipified ones off).
        "NVTE_USE_CAST_TRANSPOSE_TRITON": "1",
        "NVTE_USE_OPTIMIZED_HIPIFIED_CAST_TRANSPOSE": "0",
        # PyTorch's tensor-register allocator hook off, as run_pretrain.sh sets for Megatron.
        "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "0",
    },
    # cpu: the tran launcher sets OMP_NUM_THREADS from the core count and the process count.
    "cpu": {},
}


# The NVTE_* switches each Megatron attention backend requires (its language module stops at model build when they
# disagree: docs/CONFORMANCE.md), exported outright so an NVTE_* variable left in a shell cannot crash the job.
ATTENTION_BACKEND_ENV: dict[str, dict[str, str]] = {
    "flash": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "0"},
    "fused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "0"},
    "unfused": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "1"},
    "local": {"NVTE_FLASH_ATTN": "0", "NVTE_FUSED_ATTN": "0", "NVTE_UNFUSED_ATTN": "0"},
    "auto": {"NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "1", "NVTE_UNFUSED_ATTN": "1"},
}


def attention_env(backend: str) -> dict[str, str]:
    """The NVTE_* attention switches that agree with Megatron's ``--attention-backend backend``."""
    if backend not in ATTENTION_BACKEND_ENV:
        raise ValueError(f"attention backend {backend!r}: allowed values are {', '.join(ATTENTION_BACKEND_ENV)}")
    return dict(ATTENTION_BACKEND_ENV[backend])


def launcher_env(platform: str, extra: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables to set for ``platform`` (plus framework ``extra``); the caller's environment wins."""
    if platform not in PLATFORM_ENV:
        raise ValueError(f"platform {platform!r}: allowed values are {', '.join(PLATFORM_ENV)}")
    env = os.environ if environ is None else environ
    wanted = {**PLATFORM_ENV[platform], **(extra or {})}
    return {key: env.get(key, value) for key, value in wanted.items()}


# Where torch's compile and build caches go when the caller names none: under DATA_DIR's bookkeeping folder, so a
# job leaves nothing in TMPDIR or home and the cache serves the next job. Not in launcher_env: it changes no figure.
CACHE_FOLDER = Path(".tprimat") / "cache"  # utils/files/locks.py LOCK_DIR: shell/purge.sh removes it with the locks
JOB_CACHE_DIRS: dict[str, str] = {
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",  # /tmp/torchinductor_<user>: made by importing torch._inductor
    "TRITON_CACHE_DIR": "triton",  # ~/.triton/cache: compiled GPU kernels
    "TORCH_EXTENSIONS_DIR": "torch_extensions",  # ~/.cache/torch_extensions: ops built at run time (DeepSpeed's)
}


def cache_env(data_dir: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{variable: <DATA_DIR>/.tprimat/cache/<folder>}`` for each cache the caller's environment does not place;
    empty when the folder cannot be made (torch's defaults rather than a failed job)."""
    env = os.environ if environ is None else environ
    wanted = {key: Path(data_dir) / CACHE_FOLDER / folder for key, folder in JOB_CACHE_DIRS.items() if key not in env}
    try:
        for folder in wanted.values():
            folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}
    return {key: str(folder) for key, folder in wanted.items()}
