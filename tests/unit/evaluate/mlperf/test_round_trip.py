"""A tprimat PROFILE=mlperf result -> its MLLOG (utils/result/mllog.py) -> the import: the same quality block.

An MLLOG holds times in whole milliseconds, so times agree to the millisecond; it holds no energy and not the
run's own words for why it stopped, so those two reasons are the import's; everything else is equal
(tests/helpers/mlperf.py ``assert_same_quality``). A real tiny cpu run makes the same trip in
tests/unit/train/frameworks/test_tran_mlperf.py, on the run that test starts anyway.
"""

from __future__ import annotations

import pytest

from tests.helpers.mlperf import FULL, TINY, assert_same_quality, imported_quality, mlperf_result
from utils.result.file import read_result
from utils.result.mllog import mllog_text
from utils.schema.model import Result


@pytest.mark.parametrize("losses, workload, reached", [([3.6, 3.4, 3.25], FULL, True), ([7.9, 7.1], TINY, False)])
def test_a_result_through_its_mllog_keeps_its_quality_block(tmp_path, losses, workload, reached):
    def stopped(result: Result) -> None:  # a run at the target ends there (STOP_AT_TARGET), as a real one does
        if result.quality is not None and result.quality.reached:
            result.quality = result.quality.model_copy(update={"stop_reason": "target", "stopped_at_target": True})

    result = read_result(mlperf_result(tmp_path / "run", losses, mutate=stopped, **workload))
    assert result.quality is not None and result.quality.reached is reached
    mllog = tmp_path / "train_nvd_mega_llama_mlperf.mllog"
    mllog.write_text(mllog_text(result))
    assert_same_quality(result.quality, imported_quality(mllog, tmp_path / "out"))
