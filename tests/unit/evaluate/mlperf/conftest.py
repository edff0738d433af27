"""The carried sample of MLPerf Training v5.1 (tests/fixtures/mlperf/README.md): extracted once, imported once."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker.mlp_parser import parse_file

from evaluate.mlperf.cli import main
from tests.helpers.mlperf import SAMPLE


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample as a clone holds it: ``.../training_results_v5.1/<submitter>/...``."""
    root = tmp_path_factory.mktemp("mlperf-tree")
    with tarfile.open(SAMPLE) as archive:
        archive.extractall(root, filter="data")
    return root / "training_results_v5.1"


@pytest.fixture(scope="session")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's 90 runs imported from the archive itself."""
    out = tmp_path_factory.mktemp("mlperf-imported")
    assert main(["import", str(SAMPLE), "--output-dir", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def parsed(sample_tree: Path) -> dict[Path, tuple[list, list]]:
    """mlperf-logging's parser on three logs of every sample system (the oracle of the reader and the score)."""
    logs = [log for folder in sorted(sample_tree.glob("*/results/*/llama31_8b"))
            for log in sorted(folder.glob("result_*.txt"))[:3]]
    return {path: parse_file(str(path), "5.1.0") for path in logs}
