"""Hand-made amd/nvd results for the evaluate tests, built through the real result API.

Results come from ``utils.result.file.new_result``, the producers of ``utils.measure.metrics``
(performance and memory blocks over synthetic per-step arrays), ``utils.measure.power``
(energy) and real fingerprints of small files, then ``finalize_result`` and
``write_result``, so they can never drift from the typed model the launchers write.
Nothing here is a hand-typed JSON blob; a test that needs a broken result changes
the typed ``Result`` through ``mutate`` (the write validates it as a whole) or edits
the written file's text.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.profiles import apply_profile
from utils.config.load import load_config
from utils.config.model import REPO_ROOT, Config
from utils.dataset.fingerprint import fingerprint
from utils.machine.hardware import peak_tflops
from utils.measure.power import DeviceEnergy, power_metrics
from utils.result.file import finalize_result, new_result, result_path, write_result
from utils.result.step_log import record_steps
from utils.schema.hardware import GpuInfo
from utils.schema.measures import Source
from utils.schema.model import Result
from utils.spec.models import flops_per_token, workload_shape

DEVICES = {"amd": ("AMD Instinct MI300X", "rocm", "6.4.1", 192.0),
           "nvd": ("NVIDIA H100 80GB HBM3", "cuda", "12.8", 79.6),
           "cpu": (None, "cpu", None, None)}

# A full-size 8-GPU workload (GBS = 1*8*8 = 64), the default of config.env.
BASE_WORKLOAD = {"DATASET": "bc", "MODEL_SIZE": "full", "TRAIN_ITERS": "30", "WARMUP_STEPS": "5",
                 "MEASURE_SKIP_STEPS": "3", "SL": "2048", "MBS": "1", "DP": "8", "GA": "8", "TP": "1", "PP": "1",
                 "CP": "1", "NNODES": "1", "GPUS_PER_NODE": "8", "PRECISION": "bf16", "FP8": "false",
                 "PLATFORM": ""}


def workload_config(**overrides: str) -> Config:
    """The config a run would have loaded, from config.env plus these keys (no process environment)."""
    return load_config(REPO_ROOT / "config.env", environ={**BASE_WORKLOAD, **overrides})


def fake_dataset(root: Path, model: str, content: bytes = b"tokens", vocab: str = "v1") -> tuple[Path, Path]:
    """A Megatron prefix (.bin/.idx) and a tokenizer directory whose hashes the fingerprint will take."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    prefix = data / f"bc-{model}_text_document"
    Path(f"{prefix}.bin").write_bytes(content * 100)
    Path(f"{prefix}.idx").write_bytes(b"MMIDIDX" + content)
    valid = data / f"bc-{model}-valid_text_document"  # the held-out set a run that evaluates reads (issue 34)
    Path(f"{valid}.bin").write_bytes(content * 10)
    Path(f"{valid}.idx").write_bytes(b"MMIDIDX" + content)
    tokenizer = root / "tokenizers" / model
    tokenizer.mkdir(parents=True, exist_ok=True)
    (tokenizer / "tokenizer.json").write_text(json.dumps({"model": model, "vocab": vocab}), encoding="utf-8")
    return prefix, tokenizer


def gpu_info(platform: str, count: int = 8) -> GpuInfo:
    name, stack, version, memory = DEVICES[platform]
    return GpuInfo(device_name=name, device_count=count, total_memory_gb=memory, software_stack=stack,
                   software_version=version, pytorch_version="2.7.0", driver_version="test-driver",
                   peak_tflops={"bf16": peak_tflops(name, "bf16")[0], "fp8": peak_tflops(name, "fp8")[0]})


def synthetic_arrays(steps: int, step_time: float, seed: int, loss_offset: float = 0.0,
                     jitter: float = 0.01, memory_gb: float = 60.0) -> dict[str, list[float | None]]:
    """Step times around ``step_time`` (first step slow: warm-up), a decaying loss, constant memory."""
    rng = random.Random(seed)
    times = [step_time * (3.0 if i == 0 else 1.0 + rng.uniform(-jitter, jitter)) for i in range(steps)]
    # a cross-entropy stays above 0 (utils/measure/plausible.py): the decay flattens past step 75
    losses = [max(0.2, 11.0 - 2.5 * math.log1p(i)) + loss_offset + rng.uniform(-0.02, 0.02) for i in range(steps)]
    return {
        "step_times": times,
        "loss_values": losses,
        "learning_rates": [3e-4 * min(1.0, (i + 1) / 5) for i in range(steps)],
        "memory_allocated_gb": [memory_gb] * steps,
    }


def make_result(
    out_dir: Path,
    platform: str,
    framework: str,
    model: str = "llama",
    *,
    step_time: float | None = None,
    run_index: int | None = None,
    seed: int = 0,
    data_root: Path | None = None,
    data_content: bytes = b"tokens",
    tokenizer_vocab: str = "v1",
    loss_offset: float = 0.0,
    status: str = "ok",
    with_power: bool = True,
    mutate: Callable[[Result], Any] | None = None,
    **workload: str,
) -> Path:
    """Write one valid result file and return its path; ``workload`` overrides config keys (SL="4096", ...).

    ``PROFILE="tuned"`` runs the job's vendor recipe (train/profiles/), as the launcher does: its
    workload and the recorded profile block. ``mutate(result)`` changes the finished typed result
    just before it is written.
    """
    cfg, profile = apply_profile(workload_config(**workload), platform, framework, model)
    shape = workload_shape(cfg, model)
    root = data_root or out_dir.parent / "fake-data"
    prefix, tokenizer = fake_dataset(root, model, data_content, tokenizer_vocab)
    result = new_result(cfg, platform=platform, framework=framework, model=model, shape=shape,
                        gpu_info=gpu_info(platform, cfg.world_size), source=Source(kind="callback"),
                        run_index=run_index, fingerprint=fingerprint(cfg, shape, prefix, tokenizer))
    if step_time is None:  # 1.5 s for the base workload, scaled by the work per GPU: a plausible MFU for any workload
        work = cfg.tokens_per_step / cfg.world_size * flops_per_token(shape, cfg.sl).full
        base = 64 * 2048 / 8 * flops_per_token(shape, 2048).full
        step_time = 1.5 * max(work / base, 1e-3)
    arrays = synthetic_arrays(cfg.train_iters, step_time, seed, loss_offset)
    if status != "ok":
        arrays = {k: v[: cfg.train_iters // 2] for k, v in arrays.items()}
    record_steps(result, arrays, skip_steps=cfg.skip_steps, shape=shape, peak_allocated_gb=62.0, peak_reserved_gb=70.0)
    if with_power:
        measured = len(arrays["step_times"]) - cfg.skip_steps
        duration = sum(arrays["step_times"][cfg.skip_steps:])
        watts = 700.0 if platform == "nvd" else 750.0
        devices = [DeviceEnergy("test", 100, duration, watts * duration, watts) for _ in range(cfg.world_size)]
        result.power_metrics = power_metrics(devices, gpus_total=cfg.world_size, tokens=measured * cfg.gbs * cfg.sl)
    finalize_result(result, status, None if status == "ok" else f"run {status} in a test")
    result.profile_settings = profile.block()
    if mutate is not None:
        mutate(result)
    return write_result(result_path(out_dir, platform, framework, model, run_index, cfg.profile), result)
