"""data.encode against Megatron-LM's own ``tools/preprocess_data.py --append-eod``, byte for byte, from fetched trees.

Run only where the variables point at Megatron-LM trees (docs/CONFORMANCE.md), skipped with the
reason otherwise; the default suite checks the same with Megatron's tokenizer code from the
megatron-core wheel (tests/unit/data/test_data_token_policy.py):

* ``TPRIMAT_MEGATRON_LM``: the ``MEGATRON_REF`` tree (847781764f): ``BOS_POLICY=megatron``;
* ``TPRIMAT_MEGATRON_LM_LEGACY``: a core_v0.12.0 tree: ``BOS_POLICY=tokenizer`` (the pinned ref's
  ``--legacy-tokenizer`` cannot serve: its worker initializer never sets ``Encoder.tokenizer``,
  which :func:`test_legacy_flag_at_the_pinned_ref_writes_no_dataset` shows);
* ``TPRIMAT_MEGATRON_PYTHON``: the Python that runs them (default: this one; the trees' imports
  need torch, transformers, numpy and ``six``; put extra packages on ``PYTHONPATH``).

The corpus is the generated sample text with awkward documents among it: empty, whitespace
only, special-token look-alikes, decomposed accents, emoji, long whitespace runs, each as
``data/clean.py`` leaves it (``normalize``: what the pipeline encodes). Cleaning matters for one
model: Mistral's slow ``LlamaTokenizer``, which preprocess_data builds at MEGATRON_REF (issue 40), puts
a "▁" piece before a text that starts with whitespace where the fast tokenizer data/encode uses does
not (tests/unit/data/test_sample_tokenizers_slow.py shows it; docs/SAMPLE_ORDER.md); no cleaned
document starts with whitespace.

Run it with the images' transformers (the conformance runner's ``megatron-amd`` and ``megatron-nvd``
Pythons, ``tests/conformance/run.py``): the slow tokenizer classes are built from their own files
there, as in the images, not from ``tokenizer.json`` as transformers 5 does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.encode_bench import megatron_env, preprocess_data_argv, tree_commit
from data import encode
from data.clean import normalize
from data.sample_corpus import SampleSpec, generate_documents
from tests.helpers.tokenizers import REAL_FORMAT_MODELS, real_format_tokenizer

pytestmark = pytest.mark.slow

AWKWARD = ["", "   ", "\n\n", "\t", "Special <|end_of_text|> and <|endoftext|> and </s> <s> <|im_start|>inside.",
           "<|begin_of_text|>", "decomposed e\u0301 and \u00e9", "Zürich 東京 Москва 🙂👩\u200d💻", " " * 300 + "x",
           "it's I'M we'll 1234567 3.14", "trailing spaces   ", " leading space"]


# The three releases' formats (tests/helpers/tokenizers.py) and Llama 3's full 128,256-token vocabulary.
TOKENIZERS = (*REAL_FORMAT_MODELS, "llama3-full")


def tokenizer_for(name: str, out_dir: Path) -> Path:
    if name == "llama3-full":
        from bench.llama3_tokenizer import write_llama3_tokenizer

        return write_llama3_tokenizer(out_dir)
    return real_format_tokenizer(name, out_dir)


def _tree(variable: str) -> Path:
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is not set (a Megatron-LM tree: docs/CONFORMANCE.md)")
    tree = Path(value).resolve()
    if not (tree / "tools" / "preprocess_data.py").is_file():
        pytest.fail(f"{variable}={tree}: no tools/preprocess_data.py there")
    return tree


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = list(generate_documents(SampleSpec(seed=7, target_bytes=400_000)))
    for position, text in enumerate(AWKWARD):
        texts.insert(position * 17, text)
    texts = [normalize(text) for text in texts]  # what data/clean.py hands data/encode
    path = tmp_path_factory.mktemp("corpus") / "clean.jsonl"
    path.write_text("".join(json.dumps({"text": text}, ensure_ascii=False) + "\n" for text in texts), encoding="utf-8")
    return path


def run_preprocess_data(tree: Path, corpus: Path, tok_dir: Path, out_prefix: Path,
                        legacy_tokenizer: bool = False) -> subprocess.CompletedProcess[str]:
    argv = preprocess_data_argv(tree, corpus, tok_dir, out_prefix, workers=2,
                                python=os.environ.get("TPRIMAT_MEGATRON_PYTHON"), legacy_tokenizer=legacy_tokenizer)
    return subprocess.run(argv, env=megatron_env(tree), capture_output=True, text=True, timeout=1800, check=False)


def _assert_identical(ours: Path, theirs: Path) -> None:
    for suffix in (".bin", ".idx"):
        mine, other = Path(f"{ours}{suffix}").read_bytes(), Path(f"{theirs}_text_document{suffix}").read_bytes()
        assert len(mine) > 0 and mine == other, f"{suffix}: {len(mine)} vs {len(other)} bytes"


@pytest.mark.parametrize(("variable", "policy"), [("TPRIMAT_MEGATRON_LM", "megatron"),
                                                  ("TPRIMAT_MEGATRON_LM_LEGACY", "tokenizer")])
@pytest.mark.parametrize("model", TOKENIZERS)
def test_data_encode_writes_preprocess_datas_bytes(tmp_path: Path, corpus: Path, model: str, variable: str,
                                                   policy: str) -> None:
    tree = _tree(variable)
    tok_dir = tokenizer_for(model, tmp_path / "tokenizer")
    done = run_preprocess_data(tree, corpus, tok_dir, tmp_path / "megatron")
    assert done.returncode == 0, done.stderr[-3000:]
    stats = encode.encode_file(corpus, tok_dir, tmp_path / "ours", workers=2, progress=False, policy=policy)
    _assert_identical(tmp_path / "ours", tmp_path / "megatron")
    assert stats.documents == len(corpus.read_text(encoding="utf-8").splitlines())


def test_invalid_utf8_gives_neither_tool_a_dataset(tmp_path: Path, corpus: Path) -> None:
    """preprocess_data dies in its worker process (UnicodeDecodeError) and leaves no .idx; data.encode refuses in
    one line and leaves neither file."""
    tree = _tree("TPRIMAT_MEGATRON_LM")
    tok_dir = tokenizer_for("llama", tmp_path / "tokenizer")
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(corpus.read_bytes()[:20_000].rsplit(b"\n", 1)[0] + b'\n{"text": "bad \xff byte"}\n')
    done = run_preprocess_data(tree, broken, tok_dir, tmp_path / "megatron")
    assert "UnicodeDecodeError" in done.stderr
    assert not Path(f"{tmp_path / 'megatron'}_text_document.idx").exists()
    with pytest.raises(encode.DataError, match="not UTF-8"):
        encode.encode_file(broken, tok_dir, tmp_path / "ours", workers=2, progress=False)
    assert not list(tmp_path.glob("ours*")) and not list(tmp_path.glob(".ours*"))


def test_legacy_flag_at_the_pinned_ref_writes_no_dataset(tmp_path: Path, corpus: Path) -> None:
    """Why BOS_POLICY=tokenizer is matched against core_v0.12.0, not the pinned ref's --legacy-tokenizer."""
    tree = _tree("TPRIMAT_MEGATRON_LM")
    if not (tree_commit(tree) or "847781764f").startswith("847781764f"):
        pytest.skip("only claimed for 847781764f")
    tok_dir = tokenizer_for("llama", tmp_path / "tokenizer")
    done = run_preprocess_data(tree, corpus, tok_dir, tmp_path / "megatron", legacy_tokenizer=True)
    assert "type object 'Encoder' has no attribute 'tokenizer'" in done.stderr
    assert not Path(f"{tmp_path / 'megatron'}_text_document.idx").exists()
