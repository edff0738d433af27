"""The tokenizer the vendor stacks' datasets get: no pad role naming a real token, nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.tokenizers import real_format_tokenizers
from utils.dataset.framework_tokenizer import TokenizerRoleError, check_eos, dataset_tokenizer_dir, pad_role
from utils.dataset.paths import load_tokenizer

TEXTS = ["The café sold 1234 loaves.", "Zürich\n\nand 東京 <|endoftext|> [INST]"]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return real_format_tokenizers(tmp_path_factory.mktemp("roles"))


def test_qwen_gets_a_copy_without_pad_that_encodes_the_same(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    original = load_tokenizer(tokenizers["qwen"])
    role = pad_role(original)
    assert role.collides and role.token == role.eos == "<|endoftext|>"
    assert "pad token <|endoftext|>" in role.note("qwen") and "its EOS" in role.note("qwen")
    named = dataset_tokenizer_dir(tokenizers["qwen"], tmp_path / "generated", write=False)
    assert not (tmp_path / "generated").exists()  # a dry run names the copy only
    copy_dir = dataset_tokenizer_dir(tokenizers["qwen"], tmp_path / "generated")
    assert copy_dir == named
    assert copy_dir.parent == tmp_path / "generated" and copy_dir.name.startswith("qwen-nopad-")
    copy = load_tokenizer(copy_dir)
    assert copy.pad_token is None and copy.pad_token_id is None and not pad_role(copy).collides
    assert (copy.eos_token_id, len(copy)) == (original.eos_token_id, len(original))
    assert [copy(t)["input_ids"] for t in TEXTS] == [original(t)["input_ids"] for t in TEXTS]
    assert dataset_tokenizer_dir(tokenizers["qwen"], tmp_path / "generated") == copy_dir  # reused, not rewritten
    assert json.loads((tokenizers["qwen"] / "tokenizer_config.json").read_text())["pad_token"] == "<|endoftext|>"


@pytest.mark.parametrize("model", ["llama", "mistral"])
def test_tokenizers_without_pad_are_handed_over_as_they_are(tokenizers: dict[str, Path], tmp_path: Path,
                                                            model: str) -> None:
    assert not pad_role(load_tokenizer(tokenizers[model])).collides
    assert dataset_tokenizer_dir(tokenizers[model], tmp_path) == tokenizers[model]
    assert not list(tmp_path.iterdir())


def test_a_dedicated_pad_token_is_no_collision(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    tokenizer = load_tokenizer(tokenizers["llama"])
    tokenizer.add_special_tokens({"pad_token": "<|tprimat_pad|>"})
    assert not pad_role(tokenizer).collides
    tokenizer.pad_token = "<|eot_id|>"  # a special token the data does not hold, but not EOS/BOS/UNK: harmless
    assert not pad_role(tokenizer).collides
    tokenizer.pad_token = "<|end_of_text|>"
    assert pad_role(tokenizer).collides


def test_an_eos_outside_the_vocabulary_is_refused_naming_it(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for path in tokenizers["qwen"].iterdir():
        (broken / path.name).write_bytes(path.read_bytes())
    config = json.loads((broken / "tokenizer_config.json").read_text())
    config["eos_token"] = "<|no_such_token|>"
    (broken / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(TokenizerRoleError, match=r"EOS token <\|no_such_token\|> is not in its vocabulary"):
        check_eos(load_tokenizer(broken), broken)
    with pytest.raises(TokenizerRoleError, match=r"<\|no_such_token\|>"):
        dataset_tokenizer_dir(broken, tmp_path / "generated")
