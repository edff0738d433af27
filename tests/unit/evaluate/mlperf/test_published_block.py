"""The result schema's published-run block: framework ``mlperf`` with a ``published`` block and an MLLOG source only."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.helpers.mlperf import FULL, mlperf_result
from utils.result.file import read_result
from utils.schema.model import Result
from utils.spec.registry import PUBLISHED_FRAMEWORK

PUBLISHED = {"origin": "MLPerf Training v5.1 (mlcommons/training_results_v5.1)", "round": "5.1", "submitter": "AMD",
             "system": "SMCI355X", "system_id": "MI355X_EPYC_9575F_pytorch", "benchmark": "llama31_8b",
             "division": "closed", "availability": "Available on-premise", "accelerator": "AMD Instinct MI355X",
             "nodes": 1, "accelerators_per_node": 8, "framework": "PyTorch 2.8.0", "counted": True,
             "log": "AMD/results/MI355X_EPYC_9575F_pytorch/llama31_8b/result_0.txt", "log_sha256": "0" * 64}


@pytest.fixture
def data(tmp_path) -> dict:
    return json.loads(read_result(mlperf_result(tmp_path, [3.5, 3.2], platform="amd", **FULL)).model_dump_json())


def test_a_published_run_is_valid_with_its_block_and_mllog_source(data):
    data.update(framework=PUBLISHED_FRAMEWORK, published=PUBLISHED)
    data["source"] = {"kind": "mlperf", "log_path": PUBLISHED["log"]}
    result = Result.model_validate(data)
    assert result.published is not None and result.published.submitter == "AMD"


@pytest.mark.parametrize("change, message", [
    ({"framework": PUBLISHED_FRAMEWORK}, "published run's"),  # the framework without the block
    ({"published": PUBLISHED}, "published run's"),  # the block on a tprimat stack's result
    ({"framework": PUBLISHED_FRAMEWORK, "published": PUBLISHED}, "source is its MLLOG"),  # not read from an MLLOG
])
def test_the_published_label_cannot_be_half_there(data, change, message):
    data.update(change)
    with pytest.raises(ValidationError, match=message):
        Result.model_validate(data)
