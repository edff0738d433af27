"""data/encode.py: Megatron-exact output, dtype rule, atomicity, idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data import encode, verify
from data.encoding import paths as encode_paths
from tests.helpers.data import use_data_env
from utils.dataset.paths import load_tokenizer


@pytest.mark.parametrize("model", ["llama", "qwen", "mistral"])
def test_byte_identical_to_megatron_preprocess_data(built_sample: Path, tmp_path: Path, model: str) -> None:
    """The pipeline's .bin/.idx (BOS_POLICY=megatron, the default) equal preprocess_data@847781764f's.

    The reference is preprocess_data's per-document loop with Megatron's own tokenizer code
    from the megatron-core wheel (tests/helpers/preprocess.py).
    """
    from tests.helpers.preprocess import preprocess_data_in_process

    tok_dir = built_sample / "tokenizers" / f"sample-{model}"
    reference = preprocess_data_in_process(built_sample / "sample" / "clean.jsonl", tok_dir, tmp_path / "reference")
    ours = built_sample / f"sample-{model}_text_document"
    for suffix in (".bin", ".idx"):
        assert Path(f"{ours}{suffix}").read_bytes() == Path(f"{reference}{suffix}").read_bytes(), suffix


@pytest.mark.parametrize("model", ["llama", "mistral"])
def test_tokenizer_policy_matches_the_legacy_tokenizer(built_sample: Path, tmp_path: Path, model: str) -> None:
    """BOS_POLICY=tokenizer writes what preprocess_data@core_v0.12.0 (tokenizer(text).input_ids + eod) wrote."""
    from tests.helpers.preprocess import preprocess_data_in_process

    tok_dir = built_sample / "tokenizers" / f"sample-{model}"
    corpus = built_sample / "sample" / "clean.jsonl"
    reference = preprocess_data_in_process(corpus, tok_dir, tmp_path / "reference", policy="tokenizer")
    ours = tmp_path / "ours"
    stats = encode.encode_file(corpus, tok_dir, ours, workers=2, progress=False, policy="tokenizer")
    assert stats.bos is True
    for suffix in (".bin", ".idx"):
        assert Path(f"{ours}{suffix}").read_bytes() == Path(f"{reference}{suffix}").read_bytes(), suffix


def test_default_policy_has_no_bos_and_decodes_back(built_sample: Path) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    tokenizer = load_tokenizer(built_sample / "tokenizers" / "sample-llama")
    dataset = IndexedDataset(str(built_sample / "sample-llama_text_document"))
    first_text = json.loads((built_sample / "sample" / "clean.jsonl").open().readline())["text"]
    first = dataset[0].tolist()
    assert tokenizer.bos_token_id not in first and first[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(first, skip_special_tokens=True) == first_text
    manifest = json.loads(Path(f"{built_sample / 'sample-llama_text_document'}.manifest.json").read_text())
    assert manifest["token_policy"] == {"policy": "megatron", "bos": False, "eod": True,
                                        "matches": "preprocess_data@847781764f"}


class _FakeTokenizer:
    """A slow-path tokenizer with a chosen vocabulary size: ids are character codes."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.eos_token_id = vocab - 1

    def __len__(self) -> int:
        return self.vocab

    def __call__(self, texts, return_attention_mask=False):
        return {"input_ids": [[ord(c) + self.vocab - 300 for c in text] for text in texts]}


@pytest.mark.parametrize(("vocab", "dtype", "code"),
                         [(65499, np.uint16, 8), (65500, np.int32, 4), (151665, np.int32, 4)])
def test_dtype_rule(tmp_path: Path, vocab: int, dtype: type, code: int) -> None:
    prefix = tmp_path / "fake_text_document"
    stats = encode.encode_documents(["abc", "hello"], _FakeTokenizer(vocab), prefix, workers=1, progress=False)
    assert stats.dtype == dtype.__name__
    assert verify.read_index_header(Path(f"{prefix}.idx"))["dtype_code"] == code
    tokens = np.fromfile(f"{prefix}.bin", dtype=dtype)
    assert tokens.tolist() == [*(ord(c) + vocab - 300 for c in "abc"), vocab - 1,
                               *(ord(c) + vocab - 300 for c in "hello"), vocab - 1]


@pytest.mark.parametrize("tokenizer_path", ["auto", "tokenizers"])
def test_interrupted_encode_leaves_nothing_verify_accepts(data_copy: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str],
                                                         tokenizer_path: str) -> None:
    """Ctrl-C mid-stream (here: at document 200, after three batches were written) on either path."""
    original = encode.iter_jsonl_texts

    def texts_then_interrupt(path: Path):
        for number, text in enumerate(original(path)):
            if number == 200:
                raise KeyboardInterrupt
            yield text

    monkeypatch.setattr(encode, "iter_jsonl_texts", texts_then_interrupt)
    monkeypatch.setattr(encode, "BATCH_DOCUMENTS", 64)
    monkeypatch.setattr(encode_paths, "HEAD_CHARACTERS", 20_000)  # the early start takes ~20 documents, not all
    argv = ["--force", "--model", "llama", "--no-progress", "--tokenizer-path", tokenizer_path]
    assert encode.main(argv) == 130
    prefix = data_copy / "sample-llama_text_document"
    leftovers = sorted(p.name for p in data_copy.iterdir() if p.name.startswith((prefix.name, f".{prefix.name}")))
    assert leftovers == []
    monkeypatch.setattr(encode, "iter_jsonl_texts", original)
    capsys.readouterr()
    assert verify.main(["--model", "llama"]) == 1
    assert "missing" in capsys.readouterr().err


def test_killed_encode_pair_without_manifest_is_rejected(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A process killed between rename and manifest (SIGKILL) leaves a pair with no manifest: rejected."""
    Path(f"{data_copy / 'sample-qwen_text_document'}.manifest.json").unlink()
    assert verify.main(["--model", "qwen", "--force"]) == 1
    assert "no encode manifest" in capsys.readouterr().err


def test_idempotent_and_force(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = data_copy / "sample-qwen_text_document"
    before = Path(f"{prefix}.bin").stat().st_mtime_ns
    assert encode.main(["--model", "qwen", "--no-progress"]) == 0
    assert "are current" in capsys.readouterr().out
    assert Path(f"{prefix}.bin").stat().st_mtime_ns == before
    bin_bytes = Path(f"{prefix}.bin").read_bytes()
    assert encode.main(["--model", "qwen", "--force", "--no-progress"]) == 0
    assert "documents" in capsys.readouterr().out
    assert Path(f"{prefix}.bin").read_bytes() == bin_bytes  # deterministic


def test_truncated_output_is_redone(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bin_path = Path(f"{data_copy / 'sample-llama_text_document'}.bin")
    good = bin_path.read_bytes()
    bin_path.write_bytes(good[:100])
    assert encode.main(["--model", "llama", "--no-progress"]) == 0
    assert bin_path.read_bytes() == good


def test_missing_clean_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    use_data_env(monkeypatch, tmp_path / "empty")
    assert encode.main(["--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "clean.jsonl" in err and "data.clean" in err


def test_missing_tokenizer_dir(data_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    shutil.rmtree(data_copy / "tokenizers" / "sample-qwen")
    assert encode.main(["--model", "qwen", "--force", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "sample-qwen" in err and "does not exist" in err and "run_data.sh" in err


def test_the_worker_pool_is_sized_for_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """No more threads than the corpus keeps busy (one per BYTES_PER_WORKER), never more than asked, at least one."""
    per = encode.BYTES_PER_WORKER
    assert encode.plan_workers(16, 0) == 1
    assert encode.plan_workers(16, per) == 1
    assert encode.plan_workers(16, 3 * per + 1) == 4
    assert encode.plan_workers(2, 200 * per) == 2
    monkeypatch.setattr(encode.os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    assert encode.plan_workers(0, 200 * per) == 3  # 0 = one per CPU this process may use
