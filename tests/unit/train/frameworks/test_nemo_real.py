"""Optional: build both real NeMo recipes with tprimat's overrides and read every field back.

NeMo 2.3 (``nemo-toolkit==2.3.0`` + ``nemo-run==0.4.0``) is not part of the CPU test
environment: it pins ``numpy<2``, ``lightning<=2.4`` and ``megatron-core 0.12``, which
conflict with ``cpu-requirements.txt``. Point ``TPRIMAT_NEMO_PYTHON`` at a Python that
has it (a separate virtualenv, or the ``nvcr.io/nvidia/nemo:25.04`` image's) to run this;
otherwise it is skipped, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.nemo import REPO, make_dataset_stub, make_tokenizer, write_config
from train.nemo.plugin import overrides_for
from utils.config.load import load_config
from utils.dataset.paths import dataset_prefix, job_data, tokenizer_dir


def _nemo_python() -> str | None:
    explicit = os.environ.get("TPRIMAT_NEMO_PYTHON")
    if explicit:
        return explicit
    probe = subprocess.run([sys.executable, "-c", "import nemo_run, nemo.collections.llm"], capture_output=True,
                           timeout=300)
    return sys.executable if probe.returncode == 0 else None


NEMO_PYTHON = _nemo_python()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NEMO_PYTHON is None, reason="NeMo 2 (nemo.collections.llm + nemo_run) is not importable "
                       "here; set TPRIMAT_NEMO_PYTHON to a Python with nemo-toolkit 2.3 to run this test"),
]


@pytest.mark.parametrize("model", ["llama", "qwen"])
def test_real_recipe_takes_every_override(tmp_path, model):
    # tiny Qwen's 7 heads and 1 query group split over no TP > 1 (utils/config/rules.py): its layout is CP only
    layout = {"TP": "2", "CP": "2", "DP": "2"} if model == "llama" else {"TP": "1", "CP": "2", "DP": "4"}
    cfg = load_config(write_config(tmp_path, MODEL_SIZE="tiny", MODELS=model, GA="8", LR_DECAY="cosine", **layout),
                      environ={})
    vocab = make_tokenizer(tokenizer_dir(cfg, model), 300)
    make_dataset_stub(dataset_prefix(cfg, model))
    overrides = overrides_for(cfg, model, job_data(cfg, model), "stem")
    file = tmp_path / "overrides.json"
    file.write_text(overrides.to_json(), encoding="utf-8")
    # run_path, not the script itself: a script's folder goes first on sys.path, where nemo.py would shadow NeMo
    run = "import runpy; runpy.run_path('tests/helpers/nemo.py', run_name='__main__')"
    proc = subprocess.run([NEMO_PYTHON, "-c", run, str(file)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["recipe_class"] == "Partial"
    for path, wanted in overrides.fields.items():
        got = seen["fields"][path]
        if isinstance(wanted, dict) and "_target_" in wanted:
            if wanted["_call_"] == "config":
                assert got["_class_"] == wanted["_target_"].rsplit(".", 1)[1], path
        else:
            assert got == wanted, path
    assert seen["fields"]["trainer.strategy.tensor_model_parallel_size"] == cfg.tp
    assert seen["fields"]["trainer.strategy.context_parallel_size"] == 2
    assert seen["fields"]["data"]["tokenizer"]["pretrained_model_name"] == str(tokenizer_dir(cfg, model))
    assert seen["fields"]["trainer.plugins"]["_class_"] == "MegatronMixedPrecision"
    assert seen["optim_built"] == {"class": "MegatronOptimizerModule", "lr": cfg.lr, "adam_eps": 1e-8,
                                   "scheduler": "CosineAnnealingScheduler", "scheduler_max_steps": cfg.train_iters}
    built = seen["model_config_built"]
    assert built["vocab_size"] == vocab and built["seq_length"] == cfg.sl and built["num_layers"] == 2
    assert built["init_method_std"] == cfg.init_std
    assert seen["plugin_built"]["precision"] == "bf16-mixed"
