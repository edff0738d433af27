"""System snapshot as JSON: GPUs, driver, stack versions, CPU, memory, environment, container image.

Run it on a node before (or instead of) a benchmark to record what the machine is:
``python -m evaluate.probe [--output FILE]``. It reuses the same collectors the
results use (``utils.machine.hardware.collect_gpu_info``, ``utils.machine.environment.capture_environment``)
so a probe and a result describe a machine in the same words. Anything that cannot
be read here is ``null`` with a reason; nothing is guessed. Secrets are never
captured (the environment capture drops credential-like names).
"""

from __future__ import annotations

import argparse
import json
import os
import platform as pyplatform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from utils.dataset.fingerprint import code_revision
from utils.io.atomic import atomic_write_text
from utils.machine.environment import capture_environment
from utils.machine.hardware import collect_gpu_info, cpu_name, detect_platform
from utils.result.file import now_iso

NVIDIA_QUERY = ("index,name,uuid,memory.total,driver_version,power.limit,clocks.max.sm,pci.bus_id,"
                "temperature.gpu,utilization.gpu")
TIMEOUT_S = 20


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, None) or (None, reason) for an external tool."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not on PATH"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{' '.join(argv)} failed: {exc}"
    if proc.returncode != 0:
        return None, f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[:200]}"
    return proc.stdout, None


def nvidia_gpus() -> dict[str, Any]:
    """Per-GPU rows from ``nvidia-smi --query-gpu`` plus the interconnect topology matrix."""
    out, reason = _run(["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader,nounits"])
    if out is None:
        return {"devices": None, "reason": reason}
    fields = NVIDIA_QUERY.split(",")
    devices = [dict(zip(fields, (c.strip() for c in line.split(",")), strict=False))
               for line in out.strip().splitlines() if line.strip()]
    topology, topo_reason = _run(["nvidia-smi", "topo", "-m"])
    return {"devices": devices, "topology": topology, "topology_reason": topo_reason, "reason": None}


def amd_gpus() -> dict[str, Any]:
    """``amd-smi static --json`` (or ``rocm-smi`` as text) and the ROCm version file."""
    rocm_version = None
    for candidate in (Path("/opt/rocm/.info/version"), Path("/opt/rocm/.info/version-dev")):
        if candidate.is_file():
            rocm_version = candidate.read_text().strip()
            break
    out, reason = _run(["amd-smi", "static", "--json"])
    if out is not None:
        try:
            return {"devices": json.loads(out), "rocm_version": rocm_version, "reason": None}
        except json.JSONDecodeError:
            reason = "amd-smi static --json printed something that is not JSON"
    text, text_reason = _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion"])
    if text is not None:
        return {"devices": None, "rocm_smi": text, "rocm_version": rocm_version, "reason": reason}
    return {"devices": None, "rocm_version": rocm_version, "reason": f"{reason}; {text_reason}"}


def torch_build() -> dict[str, Any]:
    """What the installed torch was built for, and what it sees."""
    # imported here: torch is optional (a probe without it records why) and its import is 2.2-3.2 s of CPU on the
    # 2-core VM (measured 2026-12-07), which ``--help`` and a bad argument are spared
    try:
        import torch
    except ImportError as exc:
        return {"version": None, "reason": f"torch not importable: {exc}"}
    info: dict[str, Any] = {
        "version": torch.__version__, "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "nccl": None,
    }
    if torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except Exception as exc:  # NCCL/RCCL missing from this build: record why
            info["nccl_reason"] = f"{type(exc).__name__}: {exc}"
    return info


def cpu_and_memory() -> dict[str, Any]:
    mem_total_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total_gb = round(int(line.split()[1]) / 1024**2, 2)
                break
    except OSError:
        pass
    sockets = None
    try:
        ids = {line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
               if line.startswith("physical id")}
        sockets = len(ids) or None
    except OSError:
        pass
    return {
        "cpu_name": cpu_name(), "logical_cpus": os.cpu_count(), "sockets": sockets,
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_total_gb": mem_total_gb,
        "numa_nodes": len(list(Path("/sys/devices/system/node").glob("node[0-9]*")))
        if Path("/sys/devices/system/node").is_dir() else None,
    }


def snapshot() -> dict[str, Any]:
    """The whole probe."""
    try:
        platform = detect_platform()
        platform_reason = None
    except ValueError as exc:
        platform, platform_reason = None, str(exc)
    gpu = collect_gpu_info(platform or "cpu").model_dump()
    vendor: dict[str, Any] = {"reason": "platform cpu: no GPU tools queried"}
    if platform == "nvd":
        vendor = nvidia_gpus()
    elif platform == "amd":
        vendor = amd_gpus()
    return {
        "probe_version": 1,
        "taken_at": now_iso(),
        "platform": platform,
        "platform_reason": platform_reason,
        "gpu_info": gpu,
        "gpus": vendor,
        "torch": torch_build(),
        "cpu": cpu_and_memory(),
        "os": {"platform": pyplatform.platform(), "kernel": pyplatform.release(), "python": sys.version.split()[0],
               "hostname": pyplatform.node()},
        "environment": capture_environment(),
        "code": code_revision().model_dump(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluate.probe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="write the JSON here (atomically) instead of stdout")
    args = parser.parse_args(argv)
    text = json.dumps(snapshot(), indent=2, default=str) + "\n"
    if args.output:
        atomic_write_text(args.output, text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
