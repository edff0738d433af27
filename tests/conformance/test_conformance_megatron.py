"""mega on both platforms through Megatron-LM's own parse_args + validate_args + attention check."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import pytest

from tests.conformance.helpers_conformance import (
    VARIANTS,
    conformance_config,
    megatron_ref_of,
    needs,
    planned,
    run_evaluate_probe,
    trans_validation_samples,
    with_encoded_data,
)
from train.launch import preflight as pf
from utils.spec.registry import model_names

pytestmark = [needs("TPRIMAT_MEGATRON_LM"), pytest.mark.slow]


def _config(tmp_path, variant):
    return conformance_config(tmp_path, variant, MEGATRON_REF=megatron_ref_of(os.environ["TPRIMAT_MEGATRON_LM"]))


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("model", model_names())
@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_mega_configuration_is_accepted_and_resolves_to_the_table(tmp_path, platform, model, variant):
    cfg = _config(tmp_path, variant)
    settings = pf.preflight(*planned(cfg, platform, "mega", model)).settings
    assert settings["grad_reduce_in_fp32"] is False
    assert settings["tensor_model_parallel_size"] == cfg.tp and settings["context_parallel_size"] == cfg.cp
    assert settings["fp8"] == ("hybrid" if cfg.fp8 else None)
    # Megatron's TransformerConfig, built by its own core_transformer_config_from_args, read back (issue 23)
    assert settings["output_layer_init_method_std"] == pytest.approx(
        cfg.init_std / math.sqrt(2 * settings["num_layers"]), rel=1e-12)


def test_language_module_refuses_nvte_switches_that_disagree(tmp_path):
    """Issue 10's first crash, judged by Megatron's own language module."""
    cfg = _config(tmp_path, "bf16-tp1-cp1")
    ctx, plan = planned(cfg, "nvd", "mega", "llama")
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, replace(plan, env={**plan.env, "NVTE_FLASH_ATTN": "1", "NVTE_FUSED_ATTN": "1"}))
    assert caught.value.setting == "NVTE_FLASH_ATTN" and "attention backend type fused" in str(caught.value)


def test_validate_args_reduces_bf16_gradients_in_fp32_without_the_flag(tmp_path):
    cfg = _config(tmp_path, "bf16-tp1-cp1")
    ctx, plan = planned(cfg, "amd", "mega", "qwen")
    plan = replace(plan, argv=[word for word in plan.argv if word != "--grad-reduce-in-bf16"])
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, plan)
    assert (caught.value.setting, caught.value.effective) == ("grad_reduce_in_fp32", True)


@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_local_implementation_is_accepted_and_resolves_to_the_local_table(tmp_path, platform):
    """MEGATRON_IMPL=local: Megatron's own validation takes --transformer-impl local with the fusions it needs off."""
    from train.settings.expected import LOCAL_IMPL

    cfg = replace(_config(tmp_path, "bf16-tp1-cp1"), megatron_impl="local")
    result = pf.preflight(*planned(cfg, platform, "mega", "llama"))
    assert result.settings["transformer_impl"] == "local"
    assert {key: result.settings[key] for key in LOCAL_IMPL} == LOCAL_IMPL


@pytest.mark.parametrize("model", model_names())
@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_megatrons_own_dataset_and_tokenizer_feed_trans_samples(tmp_path, platform, model):
    """Issue 40: the preflight's samples digest with the tree's own GPTDataset and megatron.core.tokenizers (the
    slow class the release's config names; helpers compiled by Megatron's compile_helpers where the tree has
    none), in the framework Python with the image's transformers: equal to tran's, or the job stops."""
    cfg = with_encoded_data(_config(tmp_path, "bf16-tp1-cp1"))
    cfg = replace(cfg, sl=256)
    result = pf.preflight(*planned(cfg, platform, "mega", model))
    assert "samples of mega's own GPTDataset, equal to tran's" in result.resolved_by, result.resolved_by
    assert result.settings["samples_digest"]


@pytest.mark.parametrize("platform", ["nvd", "amd"])
def test_evaluation_arguments_are_accepted_and_read_back(tmp_path, platform):
    """Issue 34: --train-data-path/--valid-data-path (one data source), --eval-iters, --eval-interval and
    --exit-signal-handler, through Megatron's own parse_args + validate_args at MEGATRON_REF, read back."""
    from tests.helpers.nemo import make_dataset_stub
    from utils.dataset.paths import valid_prefix

    cfg = _config(tmp_path, "bf16-tp1-cp1")
    cfg = replace(cfg, eval_interval=5 * cfg.gbs, eval_samples=2 * cfg.gbs, target_loss=3.3)
    make_dataset_stub(valid_prefix(cfg, "llama"))
    ctx, plan = planned(cfg, platform, "mega", "llama")
    assert "--valid-data-path" in plan.argv and "--data-path" not in plan.argv
    settings = pf.preflight(ctx, plan).settings
    assert (settings["eval_iters"], settings["eval_interval"], settings["exit_signal_handler"]) == (2, 5, True)
    assert settings["data_split"] == "100,0,0"  # the training prefix is all training


def _evaluate(tmp_path, extra: tuple[str, ...] = ()) -> tuple[dict, dict, object]:
    """Megatron's evaluate() twice on the mega plan's argv (tests/conformance/megatron_evaluate.py): its answer, the
    tokens each evaluation read, and the config. GBS 8 (MBS 1, DP 8, GA 1), 2 global batches per evaluation."""
    cfg = replace(_config(tmp_path, "bf16-tp1-cp1"), ga=1, sl=256)
    cfg = with_encoded_data(replace(cfg, eval_interval=5 * cfg.gbs, eval_samples=2 * cfg.gbs), valid=True,
                            models=("llama",))
    _, plan = planned(cfg, "nvd", "mega", "llama")
    request = {"tree": os.environ["TPRIMAT_MEGATRON_LM"], "argv": [*plan.args_after("pretrain_gpt.py"), *extra],
               "evaluations": 2}
    answer, read = run_evaluate_probe(os.environ["TPRIMAT_MEGATRON_PYTHON"], "megatron_evaluate",
                                      request, tmp_path)
    return answer, read, cfg


def test_megatrons_evaluate_reads_the_next_block_each_time_not_a_fixed_set(tmp_path):
    """Issue 50, executed: at MEGATRON_REF's line the mega argv's second evaluation reads validation samples [E, 2E),
    not the first E again, so the same weights score differently: not MLPerf's measure, as the result says
    (train/logs/quality.py MEGATRON_BLOCKS). The first E are exactly the set tran, deep and nemo read every time."""
    import numpy as np

    answer, read, cfg = _evaluate(tmp_path)
    e = cfg.eval_samples
    assert answer["eval_iters"] == cfg.eval_iters and answer["data_parallel_size"] == 1
    assert [ev["samples"] for ev in answer["evaluations"]] == [e, e]
    assert np.array_equal(read["eval1"], trans_validation_samples(cfg, 0, e))
    assert np.array_equal(read["eval2"], trans_validation_samples(cfg, e, e))
    assert not np.array_equal(read["eval1"], read["eval2"])
    first, second = (ev["loss"] for ev in answer["evaluations"])
    assert first != second  # the same weights, another block


def test_full_validation_cannot_give_a_fixed_set_at_the_pinned_lines(tmp_path):
    """Issue 50: Megatron's own fixed-set switch. At 847781764f --full-validation sizes one epoch of the held-out
    documents and sets eval_iters to the loader's length in sequences, but every iteration reads a global batch from
    a one-pass iterator: StopIteration in the first evaluation (GBS 8 > 1). The 0.12 line has no such argument."""
    answer, _, cfg = _evaluate(tmp_path, ("--full-validation",))
    if "parse_args" in answer:  # the 0.12 line (core_v0.12.0, NeMo 25.04's 3cdfd613): no such argument
        assert megatron_ref_of(os.environ["TPRIMAT_MEGATRON_LM"]).startswith(("d580efc68a", "3cdfd613e6")), answer
        assert "unrecognized arguments: --full-validation" in answer["parse_args"]
        return
    epoch = answer["eval_iters"]  # one epoch of the validation documents, in sequences
    assert answer["eval_iters"] != answer["eval_iters_asked"] and answer["evaluations"] == []
    assert answer["stop_iteration"] == {"evaluation": 1, "micro_batches_read": epoch}
    assert epoch < answer["eval_iters"] * cfg.gbs  # what the evaluation asked: eval_iters x GBS / MBS micro-batches
