"""nemo through NeMo's own recipes: overrides applied, built, optimizer and strategy connected, read back."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from tests.conformance.helpers_conformance import VARIANTS, conformance_config, needs, planned, with_encoded_data
from train.launch import preflight as pf
from utils.spec.registry import model_names

pytestmark = [needs("TPRIMAT_NEMO_PYTHON"), pytest.mark.slow]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("model", model_names())
def test_nemo_configuration_is_accepted_and_resolves_to_the_table(tmp_path, model, variant):
    """Covers issue 10's Qwen crash: qwen25_7b's strategy has no DDP config of its own."""
    cfg = conformance_config(tmp_path, variant)
    settings = pf.preflight(*planned(cfg, "nvd", "nemo", model)).settings
    assert settings["grad_reduce_in_fp32"] is False and settings["overlap_grad_reduce"] is False
    assert settings["bias_activation_fusion"] is True and settings["num_workers"] == 2


@pytest.mark.parametrize("model", model_names())
def test_nemos_own_dataset_and_tokenizer_feed_trans_samples(tmp_path, model):
    """Issue 40: the samples digest with NeMo's megatron-core GPTDataset and its AutoTokenizer (transformers 4.51.3),
    and the context-parallel exchange every stack runs (NeMo's Mistral recipe says a2a), read back."""
    cfg = replace(with_encoded_data(conformance_config(tmp_path, "bf16-tp1-cp2")), sl=256)
    result = pf.preflight(*planned(cfg, "nvd", "nemo", model))
    assert "samples of nemo's own GPTDataset, equal to tran's" in result.resolved_by, result.resolved_by
    assert result.settings["cp_comm_type"] == "p2p"


def test_the_bf16_plugin_resets_the_reduction_dtype_unless_told(tmp_path):
    cfg = conformance_config(tmp_path, "bf16-tp1-cp1")
    ctx, plan = planned(cfg, "nvd", "nemo", "qwen")
    (path, text), = plan.files.items()
    data = json.loads(text)
    del data["fields"]["trainer.plugins.grad_reduce_in_fp32"]
    with pytest.raises(pf.PreflightError) as caught:
        pf.preflight(ctx, replace(plan, files={path: json.dumps(data)}))
    assert (caught.value.setting, caught.value.effective) == ("grad_reduce_in_fp32", True)


def test_evaluation_fields_are_accepted_and_read_back(tmp_path):
    """Issue 34: the data module with the validation prefix as its own split (all three path keys), and Lightning's
    limit_val_batches / val_check_interval, built and connected by NeMo's own recipe code, read back."""
    from tests.helpers.nemo import make_dataset_stub
    from utils.dataset.paths import valid_prefix

    cfg = conformance_config(tmp_path, "bf16-tp1-cp1")
    cfg = replace(cfg, eval_interval=5 * cfg.gbs, eval_samples=2 * cfg.gbs)
    make_dataset_stub(valid_prefix(cfg, "llama"))
    settings = pf.preflight(*planned(cfg, "nvd", "nemo", "llama")).settings
    assert (settings["eval_iters"], settings["eval_interval"]) == (2, 5)


def test_every_validation_of_the_recipe_reads_the_same_first_samples(tmp_path):
    """Issue 50, executed: NeMo's data module and sampler under tprimat's recipe, through Lightning's own loops with
    tprimat's callback (tests/conformance/nemo_evaluate.py). Every validation reads validation samples [0, E), the very
    set tran and deep read, so the same weights score the same; the sampler stays at 0 and the result says fixed set.
    GBS = MBS = 8 on one rank (DP 1), 2 global batches per validation, one every 5 of 30 steps."""
    import numpy as np

    from tests.conformance.helpers_conformance import run_evaluate_probe, trans_validation_samples
    from train.nemo.plugin import overrides_for
    from train.rules.samples import valid_num_samples
    from utils.dataset.paths import job_data

    cfg = conformance_config(tmp_path, "bf16-tp1-cp1").replace(mbs=8, dp=1, ga=1, gpus_per_node=1, sl=256)
    cfg = with_encoded_data(cfg.replace(eval_interval=5 * cfg.gbs, eval_samples=2 * cfg.gbs), valid=True,
                            models=("llama",))
    overrides = tmp_path / "overrides.json"
    recipe = overrides_for(cfg, "llama", job_data(cfg, "llama"), "nemo-evaluate", write=False)
    overrides.write_text(recipe.to_json(), encoding="utf-8")
    request = {"config": cfg.as_env(), "overrides": str(overrides)}
    answer, read = run_evaluate_probe(os.environ["TPRIMAT_NEMO_PYTHON"], "nemo_evaluate", request,
                                      tmp_path)
    e, validations = cfg.eval_samples, cfg.train_iters // cfg.eval_interval_steps
    # the size NeMo asks of GPTDataset (it decides the epochs the shuffle covers) is tran's and Megatron's
    assert answer["validation_samples"] == valid_num_samples(cfg.train_iters, cfg.eval_interval_steps, e)
    assert answer["sampler"] == "MegatronPretrainingSampler" and answer["consumed_samples"] == 0
    assert sorted(read) == [f"val{k}" for k in range(1, validations + 1)], sorted(read)
    first = trans_validation_samples(cfg, 0, e)
    assert all(np.array_equal(read[name], first) for name in read)
    assert answer["status"] == "ok" and answer["fixed_set"] is True
    assert len(answer["losses"]) == validations and len(set(answer["losses"])) == 1  # the same weights, the same set
