"""data/encode.py's tokenizer paths: byte-identical to Megatron's tool on each; the log and manifest say which ran.

The reference is preprocess_data's loop with Megatron's own tokenizer code (tests/helpers/preprocess.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.llama3_tokenizer import write_llama3_tokenizer
from data import encode
from data.common import iter_jsonl_texts
from data.encoding import paths as encode_paths
from data.encoding.check import dataset_sample
from data.encoding.fast_bpe import DOCUMENT_BREAK, FastBpe
from data.file_tokenizer import PolicyTokenizer
from tests.helpers.data import copy_tree, use_data_env
from tests.helpers.preprocess import preprocess_data_in_process
from tests.helpers.tokenizers import sentencepiece_style_tokenizer
from utils.dataset.paths import load_tokenizer

AWKWARD = ["A plain sentence.", "", "   ", "Special <|end_of_text|> and <|endoftext|> tokens <|im_start|>inside.",
           f"The separator {DOCUMENT_BREAK} itself.", "decomposed e\u0301 next to <|endoftext|>\u0338",
           "tabs\t\tand\n\n\nnewlines   ", "1234567 3.14 ١٢٣ ½", "Zürich 東京 Москва 🙂👩\u200d💻", "it's I'M we'll",
           " " * 300 + "x", "<|begin_of_text|>"]


@pytest.fixture(scope="module")
def corpus(built_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus with awkward documents spread through it (some in the fast path's own check sample)."""
    texts = list(iter_jsonl_texts(built_sample / "sample" / "clean.jsonl"))
    for position, text in enumerate(AWKWARD):
        texts.insert(position * 23, text)
    path = tmp_path_factory.mktemp("corpus") / "clean.jsonl"
    path.write_text("".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def llama3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llama3_tokenizer(tmp_path_factory.mktemp("llama3") / "llama3")


Baseline = Callable[..., Path]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """``baseline(corpus, tok_dir, policy)``: preprocess_data's pair for them, written once per module.

    Several tests compare their own encode of the same corpus with the same tokenizer files and policy against it
    (the real Llama 3's three times, 1.7 s of CPU each); the key holds each tokenizer file's size and modification
    time, so a tokenizer changed in place gets a new baseline.
    """
    folder = tmp_path_factory.mktemp("baselines")
    made: dict[tuple, Path] = {}

    def get(corpus: Path, tok_dir: Path, policy: str = "megatron") -> Path:
        files = tuple(sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in tok_dir.iterdir()))
        key = (corpus, tok_dir, files, policy)
        if key not in made:
            made[key] = preprocess_data_in_process(corpus, tok_dir, folder / str(len(made)), policy=policy)
        return made[key]

    return get


def _assert_same_pair(ours: Path, baseline: Path) -> None:
    for suffix in (".bin", ".idx"):
        assert Path(f"{ours}{suffix}").read_bytes() == Path(f"{baseline}{suffix}").read_bytes(), suffix


def _encode_and_compare(corpus: Path, tok_dir: Path, tmp_path: Path, baseline: Baseline, policy: str = "megatron",
                        **options) -> encode.EncodeStats:
    tokenizer = PolicyTokenizer(load_tokenizer(tok_dir), policy)
    ours = tmp_path / "ours"
    stats = encode.encode_documents(iter_jsonl_texts(corpus), tokenizer, ours, workers=2, progress=False,
                                    batch_documents=64, check_texts=dataset_sample(corpus, count=16),
                                    tokenizer_json=tok_dir / "tokenizer.json", **options)
    _assert_same_pair(ours, baseline(corpus, tok_dir, policy))
    return stats


@pytest.mark.parametrize("policy", ["megatron", "tokenizer"])
def test_real_llama3_fast_path_is_byte_identical(corpus: Path, llama3_dir: Path, tmp_path: Path, baseline: Baseline,
                                                 capsys: pytest.CaptureFixture[str], policy: str) -> None:
    stats = _encode_and_compare(corpus, llama3_dir, tmp_path, baseline, policy)
    assert stats.tokenizer_path == "tiktoken" and stats.dtype == "int32"
    lines = [line for line in capsys.readouterr().out.splitlines() if "tokenizer path" in line]
    assert len(lines) == 1 and "tokenizer path tiktoken (fast path: 32 dataset" in lines[0]


@pytest.mark.parametrize("model", ["llama", "qwen"])
def test_sample_tokenizers_fast_path_is_byte_identical(corpus: Path, built_sample: Path, tmp_path: Path,
                                                       baseline: Baseline, model: str) -> None:
    stats = _encode_and_compare(corpus, built_sample / "tokenizers" / f"sample-{model}", tmp_path, baseline)
    assert stats.tokenizer_path == "tiktoken" and stats.tokenizer_path_seconds > 0


def test_sentencepiece_style_tokenizer_keeps_the_tokenizers_path(corpus: Path, tmp_path: Path, baseline: Baseline,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Mistral-style: a "▁" normaliser and byte fallback, which tiktoken cannot express."""
    tok_dir = sentencepiece_style_tokenizer(list(iter_jsonl_texts(corpus))[:300], tmp_path / "spm")
    stats = _encode_and_compare(corpus, tok_dir, tmp_path, baseline)
    assert stats.tokenizer_path == "tokenizers"
    assert stats.tokenizer_path_note.startswith("fast path not used: pre-tokenizer is None")
    line = next(line for line in capsys.readouterr().out.splitlines() if "tokenizer path" in line)
    assert line.endswith("(fast path not used: pre-tokenizer is None, not a regex Split followed by ByteLevel)")


def test_an_exactness_difference_falls_back_with_the_reason(corpus: Path, built_sample: Path, tmp_path: Path,
                                                            baseline: Baseline,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    original = FastBpe.encode_batch

    def last_token_off(self, texts):
        result = original(self, texts)
        if result is not None and len(result[0]):
            result[0][-1] = (int(result[0][-1]) + 1) % 256
        return result

    monkeypatch.setattr(FastBpe, "encode_batch", last_token_off)
    stats = _encode_and_compare(corpus, built_sample / "tokenizers" / "sample-llama", tmp_path, baseline)
    assert stats.tokenizer_path == "tokenizers"
    assert stats.tokenizer_path_note.startswith("fast path not used: it differs from tokenizer(text) on dataset text")


def test_turned_off_fast_path_gives_the_same_bytes(corpus: Path, built_sample: Path, tmp_path: Path,
                                                   baseline: Baseline) -> None:
    stats = _encode_and_compare(corpus, built_sample / "tokenizers" / "sample-qwen", tmp_path, baseline,
                                fast_path=False)
    assert stats.tokenizer_path == "tokenizers" and "turned off" in stats.tokenizer_path_note


def test_manifest_records_the_path_and_both_paths_agree(built_sample: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = copy_tree(built_sample, tmp_path / "data")
    use_data_env(monkeypatch, data_dir)
    prefix = data_dir / "sample-llama_text_document"
    manifest = json.loads(Path(f"{prefix}.manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["tokenizer_path"] == "tiktoken"
    assert "tiktoken" in manifest["key"]["versions"]
    fast_bytes = Path(f"{prefix}.bin").read_bytes()
    assert encode.main(["--model", "llama", "--force", "--no-progress", "--tokenizer-path", "tokenizers"]) == 0
    assert "tokenizer path tokenizers" in capsys.readouterr().out
    manifest = json.loads(Path(f"{prefix}.manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["tokenizer_path"] == "tokenizers"
    assert Path(f"{prefix}.bin").read_bytes() == fast_bytes


@pytest.mark.parametrize("head_characters", [2_000, 10 << 20])
def test_early_start_while_the_tokenizer_loads_is_byte_identical(corpus: Path, llama3_dir: Path, tmp_path: Path,
                                                                 baseline: Baseline, monkeypatch: pytest.MonkeyPatch,
                                                                 head_characters: int) -> None:
    """encode_file starts the fast path from tokenizer.json before loading; part or all of the corpus."""
    monkeypatch.setattr(encode_paths, "HEAD_CHARACTERS", head_characters)
    stats = encode.encode_file(corpus, llama3_dir, tmp_path / "ours", workers=2, progress=False)
    assert stats.tokenizer_path == "tiktoken"
    _assert_same_pair(tmp_path / "ours", baseline(corpus, llama3_dir))


def test_early_start_refused_when_the_loaded_tokenizer_differs_from_the_file(corpus: Path, built_sample: Path,
                                                                            tmp_path: Path, baseline: Baseline) -> None:
    """transformers adds a special token from tokenizer_config.json: the early ids are discarded, not written."""
    tok_dir = copy_tree(built_sample / "tokenizers" / "sample-qwen", tmp_path / "tok")
    config = json.loads((tok_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["additional_special_tokens"] = ["<|extra|>"]
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    stats = encode.encode_file(corpus, tok_dir, tmp_path / "ours", workers=2, progress=False)
    assert stats.tokenizer_path == "tokenizers"
    assert stats.tokenizer_path_note == "fast path not used: the loaded tokenizer has other added tokens than its " \
                                        "tokenizer.json"
    _assert_same_pair(tmp_path / "ours", baseline(corpus, tok_dir))
