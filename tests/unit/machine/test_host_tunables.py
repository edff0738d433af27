"""utils/machine/host_tunables.py: the host settings MLPerf submitters change, read from a fake /proc and /sys."""

from __future__ import annotations

from pathlib import Path

from utils.machine.environment import capture_environment
from utils.machine.host_tunables import read_host_tunables
from utils.schema.hardware import Environment, HostTunables


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _amd_submission_host(root: Path) -> Path:
    """A host set as AMD's MLPerf runtime_tunables.sh sets it (performance governor, state 2 off, NUMA off...)."""
    _write(root, "proc/sys/kernel/numa_balancing", "0\n")
    _write(root, "proc/sys/kernel/randomize_va_space", "0\n")
    _write(root, "proc/sys/kernel/nmi_watchdog", "0\n")
    _write(root, "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    _write(root, "sys/kernel/mm/transparent_hugepage/defrag", "[always] defer defer+madvise madvise never\n")
    _write(root, "sys/devices/system/cpu/cpuidle/current_driver", "acpi_idle\n")
    _write(root, "sys/devices/system/cpu/cpufreq/boost", "1\n")
    for cpu in range(3):
        _write(root, f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance\n")
    for index, (name, disabled) in enumerate([("POLL", "0"), ("C1", "0"), ("C2", "1")]):
        _write(root, f"sys/devices/system/cpu/cpu0/cpuidle/state{index}/name", f"{name}\n")
        _write(root, f"sys/devices/system/cpu/cpu0/cpuidle/state{index}/disable", f"{disabled}\n")
    return root


def test_every_setting_is_read_as_the_kernel_states_it(tmp_path):
    values = HostTunables(**read_host_tunables(_amd_submission_host(tmp_path)))
    assert (values.cpu_governor, values.cstates, values.cpuidle_driver) == ("performance", "POLL:on C1:on C2:off",
                                                                             "acpi_idle")
    assert (values.numa_balancing, values.aslr, values.nmi_watchdog, values.cpu_boost) == ("0", "0", "0", "1")
    assert (values.thp_enabled, values.thp_defrag) == ("always", "always")
    assert values.unreadable == {}


def test_what_cannot_be_read_is_null_with_its_reason(tmp_path):
    _write(tmp_path, "proc/sys/kernel/numa_balancing", "1\n")
    _write(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
    _write(tmp_path, "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave\n")
    values = HostTunables(**read_host_tunables(tmp_path))
    assert values.numa_balancing == "1" and values.cpu_governor == "performance (1), powersave (1)"
    assert values.aslr is None and "randomize_va_space" in values.unreadable["aslr"]
    assert "no cpuidle driver" in values.unreadable["cstates"]


def test_every_result_environment_records_them():
    environment = Environment(**capture_environment({}))
    assert environment.host_tunables is not None
    assert set(HostTunables.model_fields) >= set(read_host_tunables()) - {"unreadable"}
