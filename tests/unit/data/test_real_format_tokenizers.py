"""The test and sample tokenizers carry the releases' special tokens, roles and post-processors.

What the releases say (Meta's Llama 3.1 8B, Qwen 2.5 7B, Mistral 7B v0.3 ``tokenizer.json`` and
``tokenizer_config.json``): Llama 3.1 prepends ``<|begin_of_text|>`` through a ``TemplateProcessing``
post-processor, ends documents with ``<|end_of_text|>`` and names no pad token; Qwen 2.5 has no BOS
and names ``<|endoftext|>`` both EOS and pad; Mistral v0.3 is SentencePiece-style with ``<unk> <s>
</s>`` at ids 0-2, prepends ``<s>`` and names no pad. megatron-core's dataset reads exactly these
roles (docs/SAMPLE_ORDER.md), so they are checked through the loader real runs use.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.tokenizers import REAL_FORMAT_MODELS, real_format_tokenizers
from utils.dataset.paths import eod_id, load_tokenizer

# model: (bos, eos, pad, class in tokenizer_config.json)
RELEASE_ROLES = {
    "llama": ("<|begin_of_text|>", "<|end_of_text|>", None, "PreTrainedTokenizerFast"),
    "qwen": (None, "<|endoftext|>", "<|endoftext|>", "Qwen2Tokenizer"),
    "mistral": ("<s>", "</s>", None, "LlamaTokenizer"),
}
TEXT = "The café on Zürich street sold 1234 loaves.\n\nA second paragraph."


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return real_format_tokenizers(tmp_path_factory.mktemp("real-format"))


@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
def test_loaded_roles_are_the_releases(tokenizers: dict[str, Path], model: str) -> None:
    bos, eos, pad, _ = RELEASE_ROLES[model]
    tokenizer = load_tokenizer(tokenizers[model])
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (bos, eos, pad)
    assert eod_id(tokenizer) == tokenizer.convert_tokens_to_ids(eos)
    if pad is not None:
        assert tokenizer.pad_token_id == tokenizer.eos_token_id  # Qwen's pad collides with its EOD


@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
def test_the_post_processor_adds_bos_exactly_where_the_release_does(tokenizers: dict[str, Path], model: str) -> None:
    bos = RELEASE_ROLES[model][0]
    tokenizer = load_tokenizer(tokenizers[model])
    ids = tokenizer(TEXT)["input_ids"]
    bare = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert ids == ([tokenizer.convert_tokens_to_ids(bos), *bare] if bos else bare)
    assert tokenizer.decode(bare).strip() == TEXT
    assert tokenizer.eos_token_id not in ids  # EOS is appended by data/encode.py, never by the tokenizer


@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
def test_config_files_have_the_releases_keys(tokenizers: dict[str, Path], model: str) -> None:
    bos, eos, pad, tokenizer_class = RELEASE_ROLES[model]
    config = json.loads((tokenizers[model] / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert (config["bos_token"], config["eos_token"], config["tokenizer_class"]) == (bos, eos, tokenizer_class)
    assert ("pad_token" in config) == (model != "llama")  # Llama 3.1's file has no pad key at all
    assert config.get("pad_token") == pad
    added = {entry["content"]: int(key) for key, entry in config["added_tokens_decoder"].items()}
    spec = json.loads((tokenizers[model] / "tokenizer.json").read_text(encoding="utf-8"))
    assert added == {entry["content"]: entry["id"] for entry in spec["added_tokens"]}


def test_llama_and_qwen_specials_follow_the_vocabulary_in_release_order(tokenizers: dict[str, Path]) -> None:
    llama, qwen = (load_tokenizer(tokenizers[m]) for m in ("llama", "qwen"))
    first = llama.convert_tokens_to_ids("<|begin_of_text|>")
    assert [llama.convert_tokens_to_ids(t) for t in ("<|end_of_text|>", "<|finetune_right_pad_id|>",
                                                     "<|eot_id|>")] == [first + 1, first + 4, first + 9]
    first = qwen.convert_tokens_to_ids("<|endoftext|>")
    assert [qwen.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")] == [first + 1, first + 2]
    assert first == len(qwen) - 14


def test_mistral_keeps_sentencepiece_ids(tokenizers: dict[str, Path]) -> None:
    tokenizer = load_tokenizer(tokenizers["mistral"])
    specials = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]")
    assert [tokenizer.convert_tokens_to_ids(token) for token in specials] == [0, 1, 2, 3, 4]
    assert tokenizer.convert_tokens_to_ids("<0x00>") == 10
    unseen = "\u16a0"  # a Runic letter the sample corpus never has: byte fallback, as SentencePiece does
    byte_ids = [tokenizer.convert_tokens_to_ids(f"<0x{byte:02X}>") for byte in unseen.encode()]
    assert tokenizer(unseen)["input_ids"][-3:] == byte_ids
