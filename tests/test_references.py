"""evaluate/references.json + references.py: the published anchors and how results are matched to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_evaluate import make_result

from evaluate.references import REFERENCES_PATH, load_references, match_references
from utils.result import read_result


def test_every_design_anchor_is_present_with_source_and_config() -> None:
    references, fraction = load_references()
    assert fraction == 0.5
    by_value = {r.tokens_per_second_per_gpu: r for r in references}
    assert set(by_value) == {10254.0, 14451.0, 5377.0, 6500.0}
    assert (by_value[10254.0].gpu_family, by_value[10254.0].precision) == ("H100", "bf16")
    assert (by_value[14451.0].gpu_family, by_value[14451.0].precision) == ("H100", "fp8")
    assert (by_value[5377.0].gpu_family, by_value[5377.0].precision) == ("MI300X", "bf16")
    cvs = by_value[6500.0]
    assert (cvs.gpu_family, cvs.precision, cvs.kind, cvs.global_batch_size) == ("MI300X", "fp8", "floor", 128)
    for ref in references:
        assert ref.model == "llama" and ref.model_size == "full" and ref.seq_len == 8192 and ref.num_gpus == 8
        assert ref.source_url.startswith("https://") and ref.source_title
        assert "SL=8192" in ref.config_text()


def test_data_file_is_plain_json_with_unique_ids() -> None:
    data = json.loads(REFERENCES_PATH.read_text())
    ids = [r["id"] for r in data["references"]]
    assert len(ids) == len(set(ids))


def test_matching_needs_model_precision_seq_len_size_and_gpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    h100 = read_result(make_result(out, "nvd", "nemo", SL="8192"))
    matched = match_references(h100, 9000.0)
    assert [m.reference.tokens_per_second_per_gpu for m in matched] == [10254.0]
    assert matched[0].fraction == pytest.approx(9000 / 10254)
    assert not matched[0].flagged and matched[0].verdict() == "88% of the reference"

    slow = match_references(h100, 5000.0)[0]
    assert slow.flagged and slow.verdict().startswith("LIKELY MISCONFIGURED")

    fp8_amd = read_result(make_result(out, "amd", "prim", SL="8192", FP8="true"))
    floor = match_references(fp8_amd, 6000.0)
    assert [m.reference.kind for m in floor] == ["floor"]
    assert floor[0].verdict() == "below the validation floor (92%)"

    assert match_references(read_result(make_result(out, "nvd", "mega", SL="4096")), 9000.0) == []
    tiny = read_result(make_result(out, "nvd", "mega", "llama", SL="8192", MODEL_SIZE="tiny"))
    assert match_references(tiny, 9000.0) == []
    assert match_references(h100, None) == []
