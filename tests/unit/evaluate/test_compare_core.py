"""compare shows the megatron-core beside each NVIDIA framework that runs one (mega and nemo run two)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluate.compare import main as compare_main
from tests.helpers.evaluate import make_result
from utils.schema.model import Result


def _core(version: str | None):
    def mutate(result: Result) -> None:
        versions = result.framework_versions
        unknown = {k: v for k, v in versions.unknown.items() if k != "megatron_core"}
        if version is None:
            unknown["megatron_core"] = "not installed"
        result.framework_versions = versions.model_copy(update={"megatron_core": version, "unknown": unknown})
    return mutate


def test_the_core_version_is_shown_beside_mega_and_nemo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    make_result(out, "nvd", "mega", step_time=1.8, seed=1, mutate=_core("0.15.0rc8"))
    make_result(out, "nvd", "nemo", step_time=1.4, seed=2, mutate=_core("0.12.0rc4"))
    make_result(out, "nvd", "tran", step_time=2.0, seed=3, mutate=_core("0.16.1"))
    assert compare_main(["--results-dir", str(out)]) == 0
    report = (out / "compare.md").read_text()
    assert "Megatron-LM [core 0.15.0rc8]" in report and "NeMo [core 0.12.0rc4]" in report
    assert "[core 0.16.1]" not in report  # tran's megatron-core only reads the dataset
    assert "Megatron-LM [core 0.15.0rc8]" in capsys.readouterr().out


def test_no_core_shown_where_none_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_result(out, "nvd", "mega", step_time=1.8, seed=1, mutate=_core(None))
    make_result(out, "nvd", "nemo", step_time=1.4, seed=2, mutate=_core(None))
    assert compare_main(["--results-dir", str(out)]) == 0
    assert "[core" not in (out / "compare.md").read_text()
