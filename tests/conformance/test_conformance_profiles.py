"""PROFILE=tuned: every vendor job's recipe through the real Megatron-LM, Primus and NeMo (issue 13).

The same preflight a tuned launch runs: the framework must accept the recipe's configuration
and resolve every setting the recipe states (train/profiles/) to the recipe's value, over the
fairness table's for the rest. Skipped, with the reason, where a framework is not installed
(docs/CONFORMANCE.md has the set-up).
"""

from __future__ import annotations

import os

import pytest

from tests.conformance.helpers_conformance import megatron_ref_of, needs, with_release_tokenizers
from tests.helpers.megatron import make_config
from train.launch import preflight as pf
from train.launch.context import job_context, load_plugin

pytestmark = pytest.mark.slow
JOBS = [pytest.param("nvd", "mega", marks=needs("TPRIMAT_MEGATRON_LM")),
        pytest.param("amd", "mega", marks=needs("TPRIMAT_MEGATRON_LM")),
        pytest.param("amd", "prim", marks=needs("TPRIMAT_PRIMUS")),
        pytest.param("nvd", "nemo", marks=needs("TPRIMAT_NEMO_PYTHON"))]


def tuned_config(tmp_path, fp8: bool):
    ref = os.environ.get("TPRIMAT_MEGATRON_LM")
    cfg = make_config(tmp_path, DATASET="sample", MODEL_SIZE="full", TRAIN_ITERS="30", WARMUP_STEPS="5",
                      PROFILE="tuned", FP8=str(fp8).lower(), **({"MEGATRON_REF": megatron_ref_of(ref)} if ref else {}))
    return with_release_tokenizers(cfg)


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("model", ["llama", "qwen"])
@pytest.mark.parametrize(("platform", "framework"), JOBS)
def test_tuned_recipe_is_accepted_and_resolves_to_its_values(tmp_path, platform, framework, model, fp8):
    ctx = job_context(tuned_config(tmp_path, fp8), platform, framework, model, dry_run=True)
    settings = pf.preflight(ctx, load_plugin(framework).plan(ctx)).settings
    for key, value in ctx.profile.settings.items():
        assert settings[key] == value, key
    cfg = ctx.cfg
    assert (settings["seq_length"], settings["micro_batch_size"], settings["global_batch_size"]) == (
        cfg.sl, cfg.mbs, cfg.gbs)
    assert (settings["context_parallel_size"], settings["data_parallel_size"]) == (cfg.cp, cfg.dp)
    assert settings["grad_reduce_in_fp32"] is False and settings["norm_epsilon"] == (1e-5 if model == "llama" else 1e-6)
