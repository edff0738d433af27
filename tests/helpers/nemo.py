"""Helpers for the nemo launcher tests: an offline tokenizer, a config file, and a NeMo-side checker.

Run with a Python that has NeMo (``runpy.run_path`` from the repository root, as tests/unit/train/frameworks/
test_nemo_real.py does: run as a script, this nemo.py would shadow NeMo's package),
it builds the real recipe with :func:`train.nemo.entry.build_recipe` and prints, as JSON,
every overridden field read back from the recipe plus the objects fiddle builds from it.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

try:
    from tests.helpers.paths import REPO
except ImportError:  # run as a script by NeMo's Python, whose site-packages holds a `tests` package of its own
    REPO = Path(__file__).resolve().parents[2]

BASE_CONFIG = {
    "DATASET": "sample", "FRAMEWORK": "nemo", "MODELS": "llama qwen", "MODEL_SIZE": "full", "PLATFORM": "nvd",
    "SEED": "1234", "MBS": "2", "SL": "4096", "LR": "2.0e-4", "MIN_LR": "2.0e-5", "LR_DECAY": "cosine",
    "WARMUP_STEPS": "7", "TRAIN_ITERS": "33", "WEIGHT_DECAY": "0.05", "BETA1": "0.85", "BETA2": "0.97",
    "GRAD_CLIP": "0.5", "INIT_STD": "0.01", "TP": "1", "PP": "1", "CP": "1", "DP": "8", "GA": "4",
    "PRECISION": "bf16", "FP8": "false", "DATA_SAMPLES": "1000", "NNODES": "1", "NODE_RANK": "0",
    "MASTER_ADDR": "localhost", "MASTER_PORT": "29555", "GPUS_PER_NODE": "8", "RUNS": "1",
    "MEASURE_SKIP_STEPS": "", "PROFILING": "false",
}


def write_config(directory: Path, **overrides: str) -> Path:
    """A complete config file in ``directory`` (DATA_DIR/OUTPUT_DIR under it) with ``overrides``."""
    values = {**BASE_CONFIG, "DATA_DIR": str(directory / "data"), "OUTPUT_DIR": str(directory / "output"),
              **overrides}
    path = directory / "config.env"
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()), encoding="utf-8")
    return path


def nemo_environ(config: Path) -> dict[str, str]:
    """os.environ for a process reading ``config`` on nvd: no token, no device hints (``NVTE_*``, ``CUDA_*``)."""
    keep = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN",) and not k.startswith(("NVTE_", "CUDA_"))}
    return {**keep, "TPRIMAT_CONFIG": str(config), "PLATFORM": "nvd"}


def make_tokenizer(path: Path, words: int) -> int:
    """A word-level Hugging Face tokenizer with ``words`` + 2 ids, saved like a real one; returns its size."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, **{f"w{i}": i + 2 for i in range(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", unk_token="<unk>").save_pretrained(
        str(path))
    return len(vocab)


def make_dataset_stub(prefix: Path) -> None:
    """Empty ``.bin``/``.idx`` files: enough for path checks, never read by these tests."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".bin", ".idx"):
        Path(f"{prefix}{suffix}").write_bytes(b"")


def _plain(value: Any) -> Any:
    """Recipe values as JSON: configs become {'_class_': name, ...}."""
    import fiddle as fdl

    if isinstance(value, fdl.Buildable):
        fn = fdl.get_callable(value)
        out = {"_class_": getattr(fn, "__name__", str(fn))}
        out.update({k: _plain(v) for k, v in value.__arguments__.items()})
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def check_with_nemo(overrides_file: Path) -> dict[str, Any]:
    """Build the real recipe with the overrides; read every field back; build the optimizer and model config."""
    import fiddle as fdl

    from train.nemo.entry import build_recipe
    from train.nemo.recipe import NemoOverrides

    overrides = NemoOverrides.from_dict(json.loads(overrides_file.read_text(encoding="utf-8")))
    recipe = build_recipe(overrides)
    fields = {}
    for path in overrides.fields:
        node = recipe
        for name in path.split("."):
            node = getattr(node, name)
        fields[path] = _plain(node)
    optim = fdl.build(recipe.optim)
    # Without Transformer Engine/Apex (a CPU test venv) Megatron refuses fused RoPE; the image has TE.
    config = copy.deepcopy(recipe.model.config)
    config.apply_rope_fusion = False
    model_config = fdl.build(config)
    plugin = fdl.build(recipe.trainer.plugins)
    return {
        "recipe_class": type(recipe).__name__,
        "fields": fields,
        "callbacks": [_plain(c)["_class_"] for c in recipe.trainer.callbacks or []],
        "optim_built": {"class": type(optim).__name__, "lr": optim.config.lr, "adam_eps": optim.config.adam_eps,
                        "scheduler": type(optim.lr_scheduler).__name__,
                        "scheduler_max_steps": optim.lr_scheduler.max_steps},
        "model_config_built": {"class": type(model_config).__name__, "vocab_size": model_config.vocab_size,
                               "num_layers": model_config.num_layers, "seq_length": model_config.seq_length,
                               "init_method_std": model_config.init_method_std},
        "plugin_built": {"class": type(plugin).__name__, "precision": str(plugin.precision)},
    }


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    print(json.dumps(check_with_nemo(Path(sys.argv[1]))))
