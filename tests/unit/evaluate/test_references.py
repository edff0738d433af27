"""evaluate/analysis/references.json + references.py: the published anchors and how results are matched to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate.analysis.references import REFERENCES_PATH, load_references, match_references
from tests.helpers.evaluate import make_result
from utils.result.file import read_result


def test_every_design_anchor_is_present_with_source_and_config() -> None:
    references, fraction = load_references()
    assert fraction == 0.5
    by_id = {r.id: r for r in references}
    # the design anchors: about 10,250 BF16 and 14,450 FP8 tokens/s/GPU on 8x H100, both now read in their sources
    bf16, fp8 = by_id["dgxc-v25.02-llama31-8b-h100-bf16"], by_id["megatron-bridge-25.11-llama3-8b-h100-fp8cs"]
    assert (bf16.tokens_per_second_per_gpu, bf16.precision, bf16.verified) == (82028 / 8, "bf16", True)
    assert (fp8.tokens_per_second_per_gpu, fp8.precision, fp8.flop_convention) == (14451.0, "fp8", "causal")
    assert by_id["dgxc-v25.02-llama31-8b-h100-bf16"].flop_convention == "full"
    assert not by_id["torchao-llama31-8b-mi300x-bf16"].verified  # not found in its source: says so
    cvs = by_id["amd-cvs-llama31-8b-mi300x-fp8-floor"]
    assert (cvs.gpu_family, cvs.precision, cvs.kind, cvs.global_batch_size) == ("MI300X", "fp8", "floor", 128)
    for ref in references:
        assert ref.model == "llama" and ref.model_size == "full" and ref.seq_len == 8192 and ref.num_gpus == 8
        assert ref.source_url.startswith("https://") and ref.source_title
        assert "SL=8192" in ref.config_text() and ref.flop_convention in ("full", "causal", "not stated")
        assert ref.verified_how


def test_every_gpu_with_a_reference_has_a_datasheet_peak() -> None:
    from utils.machine.hardware import peak_source, peak_tflops

    families = {r.gpu_family for r in load_references()[0]}
    assert families == {"H100", "B200", "MI300X", "MI325X", "MI355X"}
    for family in families:
        for precision in ("bf16", "fp8"):
            value, reason = peak_tflops(f"device {family}", precision)
            assert value and reason is None, family
        assert "approximate" not in peak_source(family)


def test_data_file_is_plain_json_with_unique_ids() -> None:
    data = json.loads(REFERENCES_PATH.read_text())
    ids = [r["id"] for r in data["references"]]
    assert len(ids) == len(set(ids))


def test_matching_needs_model_precision_seq_len_gbs_size_and_gpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tuned = read_result(make_result(out, "nvd", "nemo", PROFILE="tuned"))  # SL 8192, GBS 128, 8x H100
    matched = match_references(tuned, 9000.0)
    assert [m.reference.id for m in matched] == ["dgxc-v25.02-llama31-8b-h100-bf16",
                                                 "dgxc-v25.04.02-llama31-8b-h100-bf16"]
    assert matched[0].fraction == pytest.approx(9000 / 10253.5)
    assert not matched[0].flagged and matched[0].verdict() == "88% of the reference"

    slow = match_references(tuned, 5000.0)[0]
    assert slow.flagged and slow.verdict().startswith("LIKELY MISCONFIGURED")

    fp8_amd = read_result(make_result(out, "amd", "prim", PROFILE="tuned", FP8="true"))  # GBS 128, MBS 2
    floor = match_references(fp8_amd, 6000.0)
    assert [m.reference.kind for m in floor] == ["floor"]
    assert floor[0].verdict() == "below the validation floor (92%)"

    assert match_references(read_result(make_result(out, "nvd", "mega", SL="8192")), 9000.0) == []  # GBS 64
    assert match_references(read_result(make_result(out, "nvd", "mega", SL="4096", GA="16")), 9000.0) == []
    tiny = read_result(make_result(out, "nvd", "mega", "llama", SL="8192", GA="16", MODEL_SIZE="tiny"))
    assert match_references(tiny, 9000.0) == []
    assert match_references(tuned, None) == []


def test_gpu_family_is_a_whole_token() -> None:
    from evaluate.analysis.references import same_family

    assert same_family("H100", "NVIDIA H100 80GB HBM3") and same_family("MI300X", "AMD Instinct MI300X")
    assert not same_family("B200", "NVIDIA GB200") and not same_family("H100", "NVIDIA H1000")
