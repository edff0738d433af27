"""BOS_POLICY: data.encode writes preprocess_data's bytes per policy, records it, and training refuses another policy.

The references are Megatron's own tokenizer code from the megatron-core wheel (no tree:
tests/helpers/preprocess.py); the fetched-tree run of the real script is
tests/conformance/test_conformance_preprocess_data.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data import encode, verify
from data.common import DataError
from data.ready import check_dataset
from tests.helpers.preprocess import preprocess_data_in_process
from tests.helpers.tokenizers import REAL_FORMAT_MODELS, real_format_tokenizers
from utils.config.load import load_config

# Handled as preprocess_data handles them: "" gives no ids, so no EOD and a document without a
# sequence; whitespace-only text has ids (the whitespace tokens) and gets its EOD.
AWKWARD = ["", "   ", "\n\n", "<|begin_of_text|>", "</s> <s>", "Special <|endoftext|> inside.", " leading",
           "Zürich 東京 🙂", "e\u0301"]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return real_format_tokenizers(tmp_path_factory.mktemp("real-format"))


@pytest.fixture(scope="module")
def corpus(built_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = (built_sample / "sample" / "clean.jsonl").read_text(encoding="utf-8").splitlines()[:120]
    for position, text in enumerate(AWKWARD):
        lines.insert(position * 11, json.dumps({"text": text}, ensure_ascii=False))
    path = tmp_path_factory.mktemp("corpus") / "clean.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _same(ours: Path, reference: Path) -> None:
    for suffix in (".bin", ".idx"):
        assert Path(f"{ours}{suffix}").read_bytes() == Path(f"{reference}{suffix}").read_bytes(), suffix


@pytest.mark.parametrize("policy", ["megatron", "tokenizer"])
@pytest.mark.parametrize("model", REAL_FORMAT_MODELS)
def test_each_policy_writes_preprocess_datas_bytes(tokenizers: dict[str, Path], corpus: Path, tmp_path: Path,
                                                   model: str, policy: str) -> None:
    """megatron: preprocess_data@847781764f (wheel's megatron.core.tokenizers); tokenizer: core_v0.12.0's call."""
    reference = preprocess_data_in_process(corpus, tokenizers[model], tmp_path / "reference", policy=policy)
    stats = encode.encode_file(corpus, tokenizers[model], tmp_path / "ours", workers=2, progress=False, policy=policy)
    _same(tmp_path / "ours", reference)
    # Llama 3.1 and Mistral v0.3 prepend BOS by their post-processor; Qwen 2.5 has none. Megatron's default: none.
    assert stats.bos is (policy == "tokenizer" and model != "qwen")


def test_empty_and_whitespace_documents_as_preprocess_data_writes_them(tokenizers: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in ["one", "", "   ", "two"]),
                      encoding="utf-8")
    encode.encode_file(corpus, tokenizers["llama"], tmp_path / "ours", workers=1, progress=False)
    header = verify.read_index_header(Path(f"{tmp_path / 'ours'}.idx"))
    assert (header["sequences"], header["documents"]) == (3, 5)  # "" ends a document with no sequence
    tokens = np.fromfile(f"{tmp_path / 'ours'}.bin", dtype=np.uint16)
    eod = json.loads((tokenizers["llama"] / "tokenizer_config.json").read_text())["eos_token"]
    assert eod == "<|end_of_text|>" and len(tokens) >= 6


def test_invalid_utf8_is_one_line_and_leaves_no_files(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"text": "fine"}\n{"text": "bad \xff byte"}\n')
    with pytest.raises(DataError, match=r"not UTF-8 text"):
        encode.encode_file(corpus, tokenizers["qwen"], tmp_path / "ours", workers=1, progress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.jsonl"]


def _without(tok_dir: Path, target: Path, *keys: str, **extra: object) -> Path:
    import shutil

    shutil.copytree(tok_dir, target)
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = target / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            for key in keys:
                data.pop(key, None)
            data.update(extra if name == "tokenizer_config.json" else {})
            path.write_text(json.dumps(data), encoding="utf-8")
    return target


def test_a_tokenizer_without_eos_is_refused_naming_the_token(tokenizers: dict[str, Path], data_copy: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    target = data_copy / "tokenizers" / "sample-qwen"
    import shutil

    shutil.rmtree(target)
    _without(tokenizers["qwen"], target, "eos_token", "sep_token")
    assert encode.main(["--model", "qwen", "--force", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no EOS token" in err[0] and "eos_token" in err[0]


def test_a_bos_the_tokenizer_asks_for_but_lacks_is_refused(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    from data.file_tokenizer import FileTokenizer

    broken = _without(tokenizers["mistral"], tmp_path / "mistral", "bos_token", add_bos_token=True)
    FileTokenizer(broken, "megatron")  # the default policy writes no BOS: nothing to refuse
    with pytest.raises(DataError, match=r"BOS_POLICY=tokenizer .* BOS token \(add_bos_token\).* no bos_token"):
        FileTokenizer(broken, "tokenizer")


def test_the_manifest_records_the_policy_and_training_refuses_another(data_copy: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = json.loads(Path(f"{data_copy / 'sample-mistral_text_document'}.manifest.json").read_text())
    assert manifest["token_policy"] == {"policy": "megatron", "bos": False, "eod": True,
                                        "matches": "preprocess_data@847781764f"}
    monkeypatch.setenv("BOS_POLICY", "tokenizer")
    with pytest.raises(DataError) as info:
        check_dataset(load_config(), "mistral")
    message = str(info.value)
    assert "\n" not in message and "BOS_POLICY=megatron" in message and "asks for BOS_POLICY=tokenizer" in message
    # re-encoding under the new policy makes it trainable again, now with Mistral's BOS
    assert encode.main(["--model", "mistral", "--no-progress"]) == 0
    assert verify.main(["--model", "mistral"]) == 0
    assert check_dataset(load_config(), "mistral")
    manifest = json.loads(Path(f"{data_copy / 'sample-mistral_text_document'}.manifest.json").read_text())
    assert manifest["token_policy"] == {"policy": "tokenizer", "bos": True, "eod": True,
                                        "matches": "preprocess_data@core_v0.12.0"}


def test_a_manifest_without_a_policy_is_refused(data_copy: Path) -> None:
    path = Path(f"{data_copy / 'sample-llama_text_document'}.manifest.json")
    manifest = json.loads(path.read_text())
    del manifest["token_policy"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="records no token policy"):
        check_dataset(load_config(), "llama")


def test_a_special_tokens_file_nested_past_the_limit_is_one_line(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    """A downloaded tokenizer's JSON is foreign input: read under utils/io/json_input.py's size and depth limits."""
    import shutil

    from data.file_tokenizer import FileTokenizer

    target = tmp_path / "qwen"
    shutil.copytree(tokenizers["qwen"], target)
    (target / "special_tokens_map.json").write_text('{"x": ' + "[" * 5000 + "]" * 5000 + "}", encoding="utf-8")
    with pytest.raises(DataError, match=r"^tokenizer file unusable: .*special_tokens_map.json: nested 5001 levels"):
        FileTokenizer(target, "megatron")
