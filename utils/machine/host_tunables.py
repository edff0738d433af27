"""The host settings MLPerf submitters change, read (never written) so that a result says what its host ran with.

Why: two runs on hosts set differently (governor, idle states, NUMA balancing, huge pages...) measure the hosts as well
as the GPUs, so every result records them and compare flags a vendor pair that differs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# Each setting and the file it is read from, under ROOT (the tests point ROOT at a fake tree).
FILES = {
    "numa_balancing": "proc/sys/kernel/numa_balancing",
    "aslr": "proc/sys/kernel/randomize_va_space",
    "nmi_watchdog": "proc/sys/kernel/nmi_watchdog",
    "thp_enabled": "sys/kernel/mm/transparent_hugepage/enabled",
    "thp_defrag": "sys/kernel/mm/transparent_hugepage/defrag",
    "cpuidle_driver": "sys/devices/system/cpu/cpuidle/current_driver",
    "cpu_boost": "sys/devices/system/cpu/cpufreq/boost",
}
CPU_DIR = "sys/devices/system/cpu"
MAX_READ = 4096


def _read(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read(MAX_READ).strip()


def _selected(text: str) -> str:
    """``always [madvise] never`` -> ``madvise`` (the kernel brackets the selected value)."""
    found = re.search(r"\[([^\]]+)\]", text)
    return found.group(1) if found else text


def _governors(root: Path) -> tuple[str | None, str | None]:
    """Every CPU's ``scaling_governor``, as ``performance`` or ``performance (94), powersave (2)``."""
    counts: dict[str, int] = {}
    for path in sorted((root / CPU_DIR).glob("cpu[0-9]*/cpufreq/scaling_governor")):
        try:
            value = _read(path)
        except OSError:
            continue
        counts[value] = counts.get(value, 0) + 1
    if not counts:
        return None, f"no /{CPU_DIR}/cpu*/cpufreq/scaling_governor (no cpufreq driver, e.g. a VM)"
    if len(counts) == 1:
        return next(iter(counts)), None
    return ", ".join(f"{name} ({n})" for name, n in sorted(counts.items())), None


def _cstates(root: Path) -> tuple[str | None, str | None]:
    """CPU 0's idle states as ``C1:on C1E:on C6:off`` (``disable`` = 1 is off), what ``cpupower idle-set`` changes."""
    states = sorted((root / CPU_DIR / "cpu0" / "cpuidle").glob("state[0-9]*"), key=lambda p: int(p.name[5:]))
    parts = []
    for state in states:
        try:
            name, disabled = _read(state / "name"), _read(state / "disable")
        except OSError:
            continue
        parts.append(f"{name}:{'off' if disabled == '1' else 'on'}")
    if not parts:
        return None, f"no /{CPU_DIR}/cpu0/cpuidle/state*/ (no cpuidle driver, e.g. a VM)"
    return " ".join(parts), None


def read_host_tunables(root: Path = Path("/")) -> dict[str, Any]:
    """Every setting readable on this host (Linux), each None with a reason in ``unreadable`` where it is not
    (the fields of ``utils/schema/hardware.py``'s ``HostTunables``)."""
    values: dict[str, Any] = {}
    unreadable: dict[str, str] = {}
    for key, relative in FILES.items():
        try:
            text = _read(root / relative)
        except OSError as exc:
            unreadable[key] = f"/{relative}: {exc.strerror or exc}"
            continue
        values[key] = _selected(text) if key.startswith("thp_") else text
    for key, reader in (("cpu_governor", _governors), ("cstates", _cstates)):
        value, reason = reader(root)
        if value is None:
            unreadable[key] = reason or "not readable"
        else:
            values[key] = value
    return {**values, "unreadable": unreadable}


# The settings compare holds an AMD/NVIDIA pair to.
COMPARED = ("cpu_governor", "cstates", "numa_balancing", "thp_enabled", "thp_defrag", "aslr", "nmi_watchdog",
            "cpu_boost", "cpuidle_driver")
