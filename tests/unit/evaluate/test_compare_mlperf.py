"""compare's MLPerf view (issue 35): each PROFILE=mlperf run's verdict, vendor pairs on hosts set differently.

The results carry the ``mlperf`` block the launcher adds (``utils/result/mllog.py`` with the real
checker) and the host settings every result records; mlperf runs never enter a ratio with identical ones.
"""

from __future__ import annotations

import pytest

from evaluate.compare import main as compare_main
from tests.helpers.evaluate import make_result
from tests.helpers.mlperf import FULL, mlperf_result
from utils.result.file import result_path
from utils.result.mllog import mllog_path, mlperf_record
from utils.schema.hardware import HostTunables

HOSTS = {"amd": HostTunables(cpu_governor="performance", numa_balancing="0", thp_enabled="always", aslr="0"),
         "nvd": HostTunables(cpu_governor="powersave", numa_balancing="0", thp_enabled="madvise", aslr="0")}


def _host(platform: str):
    def mutate(result) -> None:
        result.environment = result.environment.model_copy(update={"host_tunables": HOSTS[platform]})
    return mutate


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    for platform, framework, losses in (("amd", "prim", [4.2, 3.6]), ("nvd", "nemo", [4.1, 3.29])):
        path = result_path(out, platform, framework, "llama", None, "mlperf")

        def check(result, platform=platform, path=path):
            _host(platform)(result)
            result.mlperf = mlperf_record(result, mllog_path(path))

        mlperf_result(out, losses, platform, framework, mutate=check, **FULL)
        make_result(out, platform, framework, mutate=_host(platform))
    return out


def test_compare_shows_the_verdict_per_run_and_the_hosts_that_differ(compared, capsys):
    assert compare_main(["--results-dir", str(compared)]) == 0
    stdout = capsys.readouterr().out
    report = (compared / "compare.md").read_text()
    section = report[report.index("## MLPerf compliance (PROFILE=mlperf)"):]
    amd = next(line for line in section.splitlines() if line.startswith("| amd/prim"))
    nvd = next(line for line in section.splitlines() if line.startswith("| nvd/nemo"))
    assert "| FAILED (6.0.0) | 6.1.0: FAILED | Failed checks for eval_accuracy" in amd
    assert "| SUCCESS (6.0.0) | 6.1.0: SUCCESS | none | point (an RCP point (20 reference runs))" in nvd
    assert "MLPerf nvd/nemo train_nvd_nemo_llama_mlperf.json: SUCCESS (6.0.0); 6.1.0: SUCCESS" in stdout
    hosts = report[report.index("## Host settings that differ between AMD and NVIDIA runs"):]
    assert "| train_amd_prim_llama.json | train_nvd_nemo_llama.json | cpu_governor | performance | powersave |" in hosts
    assert "| thp_enabled | always | madvise |" in hosts and "| aslr |" not in hosts
    assert "WARNING: host settings differ between 2 AMD/NVIDIA pair(s)" in stdout
    for line in report.splitlines():  # no ratio pairs an mlperf run with another profile's
        if "faster on" in line:
            assert "(mlperf)" not in line, line
