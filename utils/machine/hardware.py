"""Hardware: which platform this is, what GPUs it has, and their peak dense FLOP/s.

Platform detection lives here only (the shell asks ``python -m utils.machine.hardware --platform``): ``amd`` is
``/dev/kfd`` plus ``amd-smi``/``rocm-smi`` or a ROCm torch; ``nvd`` a working ``nvidia-smi`` or a CUDA torch that
sees a device; else ``cpu``. ``PLATFORM`` overrides it; ``TPRIMAT_DEV_DIR`` stands in for ``/dev`` in tests. An
unknown device's peak is ``None`` with a reason, never guessed, so an MFU is never invented.
"""

from __future__ import annotations

import argparse
import os
import platform as _pyplatform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.config.cli import exits_on_config_error
from utils.config.load import load_config
from utils.config.model import Config
from utils.io.sanitise import one_line
from utils.machine.environment import installed_version
from utils.machine.torch_build import torch_version
from utils.schema.hardware import GpuInfo, PeakTflops
from utils.spec.registry import PLATFORMS as PLATFORM_REGISTRY
from utils.spec.registry import platform_names

PLATFORMS = platform_names()

# Dense peak TFLOP/s (bf16, fp8). Matched against the device name, most specific first. Every GPU a published
# reference point names (evaluate/analysis/references.json) is here; PEAK_SOURCES says where each figure comes from.
PEAK_TFLOPS: tuple[tuple[str, float, float], ...] = (
    ("MI355X", 2500.0, 5000.0),
    ("MI325X", 1307.4, 2614.9),
    ("MI300X", 1307.4, 2614.9),
    ("B200", 2250.0, 4500.0),
    ("H200", 989.4, 1978.9),
    ("H100 PCIe", 756.0, 1513.0),
    ("H100 NVL", 835.5, 1670.5),  # datasheet's 1,671 / 3,341 TFLOP/s are with sparsity
    ("H100", 989.4, 1978.9),  # SXM
)
PEAK_SOURCES = {
    "MI355X": ("AMD Instinct MI355X product page: 2.5 PFLOPS FP16/BF16 and 5.0 PFLOPS OCP-FP8 matrix, dense (the "
               "figure AMD's own Primus v26.4.0 primus/backends/torchtitan/patches/peak_flops_patches.py records, "
               "2500e12 at 2400 MHz; the product page rounds: 256 CUs at 2.4 GHz give 2516.6 / 5033.2)"),
    "MI325X": "AMD Instinct MI325X datasheet: 1307.4 TFLOPS FP16/BF16, 2614.9 FP8, dense",
    "MI300X": "AMD Instinct MI300X datasheet: 1307.4 TFLOPS FP16/BF16, 2614.9 FP8, dense",
    "B200": "NVIDIA DGX B200 datasheet (per GPU, dense = half the sparse figure)",
    "H200": "NVIDIA H200 SXM datasheet (dense)",
    "H100 PCIe": "NVIDIA H100 PCIe datasheet (dense)",
    "H100 NVL": "NVIDIA H100 NVL datasheet (dense = half the sparse figure)",
    "H100": "NVIDIA H100 SXM datasheet (dense)",
}


# Device memory in GiB, matched like the peak table, for the memory check where no GPU is visible (a visible GPU's own
# total wins). A nominal capacity is an upper bound (ECC and driver reservations); each row's comment says its source.
DEVICE_MEMORY_GIB: tuple[tuple[str, float], ...] = (
    ("MI355X", 288.0),  # AMD Instinct MI355X product page: 288 GB HBM3E (nominal)
    ("MI325X", 256.0),  # AMD Instinct MI325X datasheet: 256 GB HBM3E (nominal)
    ("MI300X", 192.0),  # AMD Instinct MI300X datasheet: 192 GB HBM3 (nominal)
    ("B200", 180.0),  # NVIDIA DGX B200 datasheet: 1,440 GB over 8 GPUs, 180 GB each (nominal)
    ("H200", 141.0),  # NVIDIA H200 SXM datasheet: 141 GB HBM3e (nominal)
    ("H100 PCIe", 80.0),  # NVIDIA H100 PCIe datasheet: 80 GB HBM2e (nominal)
    ("H100 NVL", 94.0),  # NVIDIA H100 NVL datasheet: 94 GB HBM3 (nominal)
    # SXM 80GB HBM3: torch.cuda.get_device_properties(0).total_memory on an NVIDIA H100 80GB HBM3, 2026-11-24
    # (issue 22's measurement: 79.2 GiB of the datasheet's 80 GB)
    ("H100", 79.2),
)
# The GPU a platform's dry run is sized for when this machine has none: the devices the project's figures are for.
REFERENCE_DEVICES = {"nvd": "NVIDIA H100 80GB HBM3", "amd": "AMD Instinct MI300X"}


def _row(table: tuple[tuple[Any, ...], ...], device_name: str | None) -> tuple[Any, ...] | None:
    """The first row of a device table whose marker is in ``device_name`` (the tables list the most specific first)."""
    upper = (device_name or "").upper()
    return next((row for row in table if upper and row[0].upper() in upper), None)


def device_memory_gib(device_name: str | None) -> tuple[float | None, str | None]:
    """Memory of one ``device_name`` in GiB from the table: ``(value, None)`` or ``(None, reason)``."""
    if not device_name:
        return None, "no accelerator: no device memory to size against"
    row = _row(DEVICE_MEMORY_GIB, device_name)
    if row:
        return row[1], None
    return None, f"device {device_name!r} is not in the memory table (utils/machine/hardware.py): memory check not done"


def peak_source(device_name: str | None) -> str | None:
    """The datasheet the peak of ``device_name`` comes from, or None when it is not tabulated."""
    row = _row(PEAK_TFLOPS, device_name)
    return PEAK_SOURCES[row[0]] if row else None


# Datasheet device-memory bandwidth, TB/s (10**12 bytes/s), with its source; matched like PEAK_TFLOPS, most specific
# first. utils/machine/prescreen.py measures a copy against it.
MEMORY_BANDWIDTH_TBS: tuple[tuple[str, float, str], ...] = (
    ("MI355X", 8.0, "AMD Instinct MI355X product page: 8 TB/s HBM3E"),
    ("MI325X", 6.0, "AMD Instinct MI325X datasheet: 6 TB/s HBM3E"),
    ("MI300X", 5.3, "AMD Instinct MI300X datasheet: 5.3 TB/s HBM3"),
    ("B200", 8.0, "NVIDIA DGX B200 datasheet: 64 TB/s HBM3E for 8 GPUs, 8 TB/s per GPU"),
    ("H200", 4.8, "NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3E"),
    ("H100 PCIe", 2.0, "NVIDIA H100 PCIe datasheet: 2 TB/s HBM2e"),
    ("H100 NVL", 3.9, "NVIDIA H100 NVL datasheet: 3.9 TB/s HBM3"),
    ("H100", 3.35, "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3"),
)


def memory_bandwidth_tbs(device_name: str | None) -> tuple[float | None, str | None, str | None]:
    """Datasheet memory bandwidth of ``device_name`` in TB/s: ``(value, source, None)`` or ``(None, None, reason)``."""
    if not device_name:
        return None, None, "no accelerator detected: datasheet memory bandwidth unknown"
    row = _row(MEMORY_BANDWIDTH_TBS, device_name)
    if row:
        return row[1], row[2], None
    return None, None, f"device {device_name!r} is not in the bandwidth table (utils/machine/hardware.py)"


def peak_tflops(device_name: str | None, precision: str = "bf16") -> tuple[float | None, str | None]:
    """Dense peak TFLOP/s for ``device_name`` at ``precision`` (bf16|fp8). Returns ``(value, None)`` or ``(None,
    reason)``."""
    if not device_name:
        return None, "no accelerator detected: peak FLOP/s unknown, MFU not computed"
    if precision not in ("bf16", "fp8"):
        return None, f"no peak table entry for precision {precision!r} (only bf16 and fp8 are tabulated)"
    row = _row(PEAK_TFLOPS, device_name)
    if row:
        return (row[1] if precision == "bf16" else row[2]), None
    return None, f"device {device_name!r} is not in the peak table (utils/machine/hardware.py): MFU not computed"


@dataclass(frozen=True)
class DeviceMemory:
    """The memory of the GPU a job will run on, and how tprimat knows it (or why it does not)."""

    device_name: str | None
    memory_gib: float | None
    basis: str
    reason: str | None = None


def host_memory_gib(meminfo: Path = Path("/proc/meminfo"),
                    cgroup_limit: Path = Path("/sys/fs/cgroup/memory.max")) -> float | None:
    """The memory a cpu job's processes share: MemTotal, or a container's cgroup limit when that is lower (a
    docker ``--memory`` shows the host's MemTotal in /proc/meminfo); None when neither can be read."""
    sizes: list[float] = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                sizes.append(int(line.split()[1]) * 1024 / 1024**3)
                break
        limit = cgroup_limit.read_text().strip() if cgroup_limit.is_file() else "max"
        if limit.isdigit():
            sizes.append(int(limit) / 1024**3)
    except (OSError, ValueError, IndexError):
        pass
    return min(sizes) if sizes else None


def device_memory(platform: str, device_name: str | None = None) -> DeviceMemory:
    """Memory of one GPU of ``platform``: the named device's table entry; else on nvd the GPU nvidia-smi reports;
    else the platform's reference GPU (:data:`REFERENCE_DEVICES`, said so in ``basis``); cpu has none."""
    basis = "the device memory table (utils/machine/hardware.py)"
    if device_name is None and platform == "nvd":
        seen = _nvidia_smi_gpus()
        if seen is not None:
            return DeviceMemory(seen[0], seen[2], "nvidia-smi memory.total of GPU 0")
    if device_name is None and platform in REFERENCE_DEVICES:
        device_name = REFERENCE_DEVICES[platform]
        basis = f"no GPU queried here: sized for {platform}'s reference GPU from the memory table"
    if device_name is None:
        return DeviceMemory(None, None, "platform cpu", f"platform {platform}: no GPU memory to check against")
    gib, reason = device_memory_gib(device_name)
    return DeviceMemory(device_name, gib, basis if gib is not None else "unknown", reason)


def _which(tool: str) -> bool:
    return shutil.which(tool) is not None


def _torch():
    try:
        import torch  # local: importing torch takes ~4.6 s on the 2-core host (-X importtime)
    except ImportError:
        return None
    return torch


def detect_platform(environ: Mapping[str, str] | None = None, dev_dir: str | None = None) -> str:
    """Return ``amd``, ``nvd`` or ``cpu``; ``PLATFORM`` in the environment wins."""
    env = os.environ if environ is None else environ
    requested = env.get("PLATFORM", "").strip().lower()
    if requested:
        if requested not in PLATFORMS:
            raise ValueError(f"PLATFORM={requested!r} is not valid; use one of: {', '.join(PLATFORMS)}")
        return requested
    dev = Path(dev_dir or env.get("TPRIMAT_DEV_DIR") or "/dev")
    if (dev / "kfd").exists() and (_which("amd-smi") or _which("rocm-smi")):
        return "amd"
    if _which("nvidia-smi"):
        try:
            subprocess.run(["nvidia-smi", "-L"], check=True, capture_output=True, timeout=20)
            return "nvd"
        except (OSError, subprocess.SubprocessError):
            pass
    # torch's build, read without importing it (utils/machine/torch_build.py): only a CUDA build imports torch, to
    # ask whether it sees a device
    version = torch_version()
    if version is not None:
        if getattr(version, "hip", None):
            return "amd"
        if getattr(version, "cuda", None):
            torch = _torch()
            if torch is not None and torch.cuda.is_available():
                return "nvd"
    return "cpu"


def resolve_platform(cfg: Config | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The platform to run on: ``PLATFORM`` from the environment, else config.env, else detected. Without
    ``cfg`` the config is loaded here, so a bad ``PLATFORM`` is a ConfigError listing the valid values."""
    if cfg is None:
        cfg = load_config(environ=environ)
    if cfg.platform:
        return cfg.platform
    env = dict(os.environ if environ is None else environ)
    env.pop("PLATFORM", None)  # empty or absent: detect
    return detect_platform(environ=env)


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            check=True, capture_output=True, text=True, timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _amd_driver() -> str | None:
    version_file = Path("/sys/module/amdgpu/version")
    if version_file.is_file():
        return version_file.read_text().strip() or None
    try:
        # local: amdsmi exists only on AMD hosts
        from amdsmi import amdsmi_get_gpu_driver_info, amdsmi_get_processor_handles, amdsmi_init

        amdsmi_init()
        handles = amdsmi_get_processor_handles()
        return amdsmi_get_gpu_driver_info(handles[0]).get("driver_version") if handles else None
    except Exception:  # amdsmi absent or failing: the driver is simply unknown
        return None


def _peaks(name: str, precision: str) -> dict[str, Any]:
    """The GpuInfo peak fields of device ``name`` for a run at ``precision``."""
    bf16, _ = peak_tflops(name, "bf16")
    fp8, _ = peak_tflops(name, "fp8")
    _, reason = peak_tflops(name, "fp8" if precision == "fp8" else "bf16")
    return {"peak_tflops": PeakTflops(bf16=bf16, fp8=fp8), "peak_tflops_reason": reason,
            "peak_tflops_source": peak_source(name)}


def cpu_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _pyplatform.processor() or None


def collect_gpu_info(platform: str, precision: str = "bf16") -> GpuInfo:
    """Describe the accelerators of ``platform``; on cpu every GPU field is honest about absence."""
    torch = _torch()
    torch_version = getattr(torch, "__version__", None) if torch else None
    if platform == "cpu" or torch is None or not torch.cuda.is_available():
        reason = "no accelerator on platform cpu: peak FLOP/s unknown, MFU not computed"
        if platform != "cpu":
            reason = f"platform {platform} but torch sees no GPU: peak FLOP/s unknown, MFU not computed"
        return GpuInfo(
            device_name=None, device_count=0, total_memory_gb=None, software_stack="cpu",
            software_version=None, pytorch_version=torch_version, driver_version=None,
            peak_tflops=PeakTflops(), peak_tflops_reason=reason, cpu_name=cpu_name(),
        )
    props = torch.cuda.get_device_properties(0)
    name = props.name
    hip = getattr(torch.version, "hip", None)
    stack, version = ("rocm", hip) if hip else ("cuda", torch.version.cuda)
    return GpuInfo(
        device_name=name, device_count=torch.cuda.device_count(),
        total_memory_gb=round(props.total_memory / 1024**3, 2), software_stack=stack,
        software_version=version, pytorch_version=torch_version,
        driver_version=_amd_driver() if hip else _nvidia_driver(), cpu_name=cpu_name(), **_peaks(name, precision),
    )


def _nvidia_smi_gpus() -> tuple[str, int, float, str | None] | None:
    """(name of GPU 0, GPU count, GiB of GPU 0, driver) from nvidia-smi, which opens no CUDA context."""
    if not _which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], check=True, capture_output=True, text=True,
                             timeout=20).stdout
        rows = [line.rsplit(",", 2) for line in out.strip().splitlines() if line.strip()]
        name, mib, driver = rows[0]
        return name.strip(), len(rows), round(float(mib) / 1024, 2), driver.strip() or None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def gpu_info_without_runtime(platform: str, precision: str = "bf16") -> GpuInfo:
    """:func:`collect_gpu_info` without torch or a GPU context, for the launcher's placeholder result (a context would
    sit on GPU 0 beside the job; importing torch costs the launcher 3-10 s): nvd asks nvidia-smi; other GPU platforms
    leave the GPU fields null, said so (the final result records the GPU)."""
    version = installed_version("torch")  # what ``torch.__version__`` says, without importing torch
    if platform == "nvd":
        seen = _nvidia_smi_gpus()
        if seen is not None:
            name, count, gib, driver = seen
            return GpuInfo(device_name=name, device_count=count, total_memory_gb=gib, software_stack="cuda",
                           software_version=None, pytorch_version=version, driver_version=driver,
                           cpu_name=cpu_name(), **_peaks(name, precision))
    reason = ("no accelerator on platform cpu: peak FLOP/s unknown, MFU not computed" if platform == "cpu" else
              f"platform {platform}: the GPU is not queried before the job starts (no GPU runtime in the launcher); "
              "the job's result records it")
    return GpuInfo(device_name=None, device_count=0, total_memory_gb=None, software_stack="cpu",
                   software_version=None, pytorch_version=version, driver_version=None, peak_tflops=PeakTflops(),
                   peak_tflops_reason=reason, cpu_name=cpu_name())


def gpu_info_for_device(platform: str, device_name: str, device_count: int, precision: str = "bf16") -> GpuInfo:
    """GpuInfo for a device named by the user (log analysis: the run's GPUs are not on this machine)."""
    return GpuInfo(
        device_name=device_name, device_count=device_count, total_memory_gb=None,
        software_stack=PLATFORM_REGISTRY[platform].software_stack if platform in PLATFORM_REGISTRY else "cpu",
        software_version=None, pytorch_version=None, driver_version=None, **_peaks(device_name, precision),
    )


FORCE_PLATFORM_ENV = "TPRIMAT_FORCE_PLATFORM"
_FORCE_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False, "": False}


def force_platform_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``TPRIMAT_FORCE_PLATFORM`` is no switch (None: unset, or one of 1/true/yes/0/false/no, any case). A typo
    (``TPRIMAT_FORCE_PLATFORM=ture``) must not silently mean "not forced", nor anything else."""
    value = (os.environ if environ is None else environ).get(FORCE_PLATFORM_ENV, "")
    if value.strip().lower() in _FORCE_VALUES:
        return None
    return (f"{FORCE_PLATFORM_ENV}={one_line(value, 40)}: must be 1, true or yes (launch anyway), "
            "or 0, false, no or empty")


def device_problem(platform: str, environ: Mapping[str, str] | None = None, dev_dir: str | None = None) -> str | None:
    """Why jobs of ``platform`` cannot run on this host (None: they can), asked before any job starts. Loose on purpose
    (a container may hold tools the host lacks): nvd needs ``nvidia-smi`` or ``/dev/nvidia0``, amd ``/dev/kfd``.
    ``TPRIMAT_FORCE_PLATFORM=1`` launches anyway. Asked by ``shell/train.sh`` (``--check-devices``) and the launcher, so
    a ``train/train_<platform>_*.sh`` run directly is refused too."""
    env = os.environ if environ is None else environ
    invalid = force_platform_problem(env)
    if invalid:
        return invalid
    if platform == "cpu" or _FORCE_VALUES[env.get(FORCE_PLATFORM_ENV, "").strip().lower()]:
        return None
    dev = Path(dev_dir or env.get("TPRIMAT_DEV_DIR") or "/dev")
    if platform == "nvd" and (_which("nvidia-smi") or (dev / "nvidia0").exists()):
        return None
    if platform == "amd" and (dev / "kfd").exists():
        return None
    vendor = {"nvd": "NVIDIA GPU (no nvidia-smi, no /dev/nvidia0)", "amd": "AMD GPU (no /dev/kfd)"}.get(platform, "GPU")
    return (f"PLATFORM={platform} but this host has no {vendor}: every job would fail; run on a {platform} host, "
            f"or set {FORCE_PLATFORM_ENV}=1 to launch anyway")


@exits_on_config_error()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.machine.hardware",
        description="Hardware questions for the shell scripts.",
        epilog="Platform order: PLATFORM in the environment, then PLATFORM in config.env ($TPRIMAT_CONFIG), "
        "then detection (amd: /dev/kfd plus amd-smi or rocm-smi, or a ROCm torch; nvd: a working nvidia-smi, "
        f"or a CUDA torch that sees a GPU; else cpu). Valid values: {', '.join(PLATFORMS)}.",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--platform", action="store_true", help="print the platform to run on (amd, nvd or cpu)")
    what.add_argument("--check-devices", metavar="PLATFORM", choices=PLATFORMS,
                      help=f"exit 2 with one line when this host has no GPU of PLATFORM ({FORCE_PLATFORM_ENV}=1: "
                           "launch anyway)")
    args = parser.parse_args(argv)
    if args.check_devices:
        problem = device_problem(args.check_devices)
        if problem:
            print(f"tprimat: {problem}", file=sys.stderr)
            return 2
        return 0
    cfg = load_config()  # before the try: a bad PLATFORM is a config error, not a platform error
    try:
        print(resolve_platform(cfg))
    except ValueError as exc:
        print(f"platform error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
