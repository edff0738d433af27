"""Sample tokenizers must load in the images' transformers 4.x as well as in the local 5.x."""

from __future__ import annotations

import json

from utils.configure import load_config
from utils.dataset import load_tokenizer, tokenizer_dir


def test_sample_tokenizers_declare_the_generic_fast_class(sample_data_dir):
    cfg = load_config(environ={"DATASET": "sample", "DATA_DIR": str(sample_data_dir), "DP": "1", "GPUS_PER_NODE": "1"})
    for model in ("llama", "qwen", "mistral"):
        directory = tokenizer_dir(cfg, model)
        config = json.loads((directory / "tokenizer_config.json").read_text())
        # transformers 5 would write "TokenizersBackend", a name transformers 4.x cannot resolve.
        assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
        tokenizer = load_tokenizer(directory)
        assert tokenizer.eos_token_id is not None and len(tokenizer("a sentence").input_ids) > 0
