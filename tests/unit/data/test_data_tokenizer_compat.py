"""Sample tokenizers must load in the images' transformers 4.x as well as in the local 5.x."""

from __future__ import annotations

import json

from utils.config.load import load_config
from utils.dataset.paths import load_tokenizer, tokenizer_dir

# The class each release's tokenizer_config.json names; transformers 4.x and 5.x both resolve these.
RELEASE_CLASSES = {"llama": "PreTrainedTokenizerFast", "qwen": "Qwen2Tokenizer", "mistral": "LlamaTokenizer"}


def test_sample_tokenizers_declare_the_releases_class(sample_data_dir):
    cfg = load_config(environ={"DATASET": "sample", "DATA_DIR": str(sample_data_dir), "DP": "1", "GPUS_PER_NODE": "1"})
    for model in ("llama", "qwen", "mistral"):
        directory = tokenizer_dir(cfg, model)
        config = json.loads((directory / "tokenizer_config.json").read_text())
        # not what transformers 5's save_pretrained writes ("TokenizersBackend", unknown to transformers 4.x)
        assert config["tokenizer_class"] == RELEASE_CLASSES[model]
        tokenizer = load_tokenizer(directory)
        assert tokenizer.eos_token_id is not None and len(tokenizer("a sentence").input_ids) > 0
