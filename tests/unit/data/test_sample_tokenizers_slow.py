"""The sample tokenizers carry what the releases carry, so Megatron's own tokenizer builds them under the images' pins.

Issue 40, finding 1: ``pretrain_gpt.py`` at MEGATRON_REF (847781764f, lines 164-168) builds the dataset
tokenizer with ``megatron.core.tokenizers``' ``build_tokenizer``, whose Hugging Face path asks
``AutoTokenizer`` for the slow class (``use_fast`` False). Under the images' transformers (4.57.1 amd,
4.51.3 nvd) ``Qwen2Tokenizer`` is built from ``vocab.json`` + ``merges.txt`` and Mistral's
``LlamaTokenizer`` from a SentencePiece ``tokenizer.model``; with ``tokenizer.json`` alone (the sample
tokenizers before) both raised ``Unable to instantiate HuggingFace AutoTokenizer``, on the GPU, after model
setup. Judged here by that very code: the megatron-core 0.15.0 wheel (its ``megatron/core/tokenizers`` is
847781764f's, file for file) in a side environment with each image's transformers
(``tests/helpers/megatron_core.py``), never the virtualenv's transformers 5, which builds slow classes from
``tokenizer.json`` and so could not see the bug.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data.clean import normalize
from data.sample_corpus import SampleSpec, generate_documents
from tests.helpers.megatron_core import side_pythonpath, transformers_pin
from tests.helpers.tokenizers import REAL_FORMAT_MODELS, real_format_tokenizer
from utils.config.model import REPO_ROOT
from utils.dataset.paths import load_tokenizer

# What each model's tokenizer_config.json names, as the release does (utils/spec/registry.py, the row's tokenizer),
# and so the class Megatron's slow path builds. Llama 3.1 names the fast class: no slow file is needed.
CLASSES = {"llama": "PreTrainedTokenizerFast", "qwen": "Qwen2Tokenizer", "mistral": "LlamaTokenizer"}
SLOW_FILES = {"llama": set(), "qwen": {"vocab.json", "merges.txt"}, "mistral": {"tokenizer.model"}}

# Run in the side environment: pretrain_gpt.py's call for --tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR
# (the arguments 847781764f's megatron/training/arguments.py defines for it), then what the dataset and
# tools/preprocess_data.py read: the class, vocabulary size, EOD and the ids of each text. One process per image
# answers every test's group of directories and texts (each start imports torch, megatron-core and transformers).
PROBE = """
import argparse, json, sys, warnings
warnings.simplefilter("ignore")
import transformers
from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer
groups = json.load(open(sys.argv[1], encoding="utf-8"))
answers = {}
for name, request in groups.items():
    out = answers[name] = {"transformers": transformers.__version__, "tokenizers": {}}
    for path in request["paths"]:
        args = argparse.Namespace(tokenizer_type="HuggingFaceTokenizer", tokenizer_model=path, vocab_file=None,
                                  merge_file=None, tokenizer_metadata=None)
        try:
            tokenizer = build_tokenizer(args)
        except Exception as exc:
            out["tokenizers"][path] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        library = tokenizer._tokenizer
        out["tokenizers"][path] = {"class": type(getattr(library, "tokenizer", library)).__name__,
                                   "vocab_size": tokenizer.vocab_size, "eod": tokenizer.eod,
                                   "ids": [tokenizer.tokenize(text) for text in request["texts"]]}
print(json.dumps(answers))
"""


def megatron_build(groups: dict[str, tuple[list[Path], list[str]]], image: str, work: Path) -> dict[str, dict]:
    """What megatron-core 0.15.0's ``build_tokenizer`` makes of each directory under ``image``'s transformers, by
    group (its directories, and the texts each tokenizes), in one process."""
    work.mkdir(parents=True, exist_ok=True)
    request = work / "request.json"
    request.write_text(json.dumps({name: {"paths": [str(p) for p in paths], "texts": texts}
                                   for name, (paths, texts) in groups.items()}), encoding="utf-8")
    environ = {**os.environ, "PYTHONPATH": side_pythonpath("0.15.0", image), "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", PROBE, str(request)], capture_output=True, text=True, env=environ,
                         cwd=REPO_ROOT, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sample-tokenizers")
    return {model: real_format_tokenizer(model, root / model) for model in REAL_FORMAT_MODELS}


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Documents as data/clean.py leaves them (what data/encode writes), with awkward ones among them."""
    raw = list(generate_documents(SampleSpec(seed=5, target_bytes=30_000)))
    raw += ["Special <|endoftext|> and </s> <s> inside.", "decomposed e\u0301", "Zürich 東京 🙂", "x  y\n\n\nz"]
    return [text for text in (normalize(one) for one in raw) if text]


WHITESPACE = " leading space"


@pytest.fixture(scope="module")
def bare(tokenizers: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What the sample tokenizers were: each model's directory with tokenizer.json alone."""
    root = tmp_path_factory.mktemp("bare-tokenizers")
    copies = {}
    for model, directory in tokenizers.items():
        copies[model] = shutil.copytree(directory, root / model)
        for name in SLOW_FILES[model]:
            (copies[model] / name).unlink()
    return copies


@pytest.fixture(scope="module")
def built(tokenizers: dict[str, Path], bare: dict[str, Path], texts: list[str],
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    """Each image's answers, one process per image: the sample tokenizers over the texts ("sample"), the bare
    copies over one text ("bare") and, under amd, Mistral's over a leading space ("whitespace")."""
    answers = {}
    for image in ("amd", "nvd"):
        groups = {"sample": (list(tokenizers.values()), texts), "bare": (list(bare.values()), ["x"])}
        if image == "amd":
            groups["whitespace"] = ([tokenizers["mistral"]], [WHITESPACE, normalize(WHITESPACE)])
        answers[image] = megatron_build(groups, image, tmp_path_factory.mktemp(f"probe-{image}"))
    return answers


def test_the_sample_tokenizers_carry_their_releases_slow_files(tokenizers: dict[str, Path]) -> None:
    for model, directory in tokenizers.items():
        names = {p.name for p in directory.iterdir()}
        assert SLOW_FILES[model] <= names, (model, sorted(names))
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert config["tokenizer_class"] == CLASSES[model]


@pytest.mark.parametrize("image", ["amd", "nvd"])
def test_megatrons_own_tokenizer_builds_each_sample_tokenizer_under_the_images_transformers(
        tokenizers: dict[str, Path], texts: list[str], built: dict[str, dict[str, dict]], image: str) -> None:
    answer = built[image]["sample"]
    assert answer["transformers"] == transformers_pin(image)  # the image's transformers, not the .venv's
    for model, directory in tokenizers.items():
        got = answer["tokenizers"][str(directory)]
        assert "error" not in got, (model, got)
        assert got["class"] == CLASSES[model], model  # the slow class the release's config names
        fast = load_tokenizer(directory)
        assert got["eod"] == fast.eos_token_id and got["vocab_size"] == len(fast), model
        ours = [fast.encode(text, add_special_tokens=False) for text in texts]  # data/encode's ids
        differ = [text for text, a, b in zip(texts, ours, got["ids"], strict=True) if a != b]
        assert not differ, f"{model}: {len(differ)} of {len(texts)} texts tokenized differently, first {differ[0]!r}"


@pytest.mark.parametrize("image", ["amd", "nvd"])
def test_without_the_slow_files_megatron_cannot_build_qwen_or_mistral(
        bare: dict[str, Path], built: dict[str, dict[str, dict]], image: str) -> None:
    """What the sample tokenizers were: tokenizer.json alone. Megatron's slow path then fails for the two models
    whose config names a slow class, exactly as it did on the GPUs."""
    answer = built[image]["bare"]
    assert answer["transformers"] == transformers_pin(image)
    assert "error" not in answer["tokenizers"][str(bare["llama"])]
    for model in ("qwen", "mistral"):
        assert "Unable to instantiate HuggingFace AutoTokenizer" in answer["tokenizers"][str(bare[model])]["error"]


def test_mistrals_slow_class_adds_a_piece_before_leading_whitespace(tokenizers: dict[str, Path],
                                                                    built: dict[str, dict[str, dict]]) -> None:
    """The one difference the slow class keeps, as the release's does (docs/SAMPLE_ORDER.md): transformers'
    slow LlamaTokenizer always prepends "▁", the fast Metaspace pre-tokenizer not before a leading space. No
    document data/clean.py leaves starts with whitespace, so no encoded document is affected."""
    slow_raw, slow_clean = built["amd"]["whitespace"]["tokenizers"][str(tokenizers["mistral"])]["ids"]
    fast = load_tokenizer(tokenizers["mistral"])
    assert len(slow_raw) == len(fast.encode(WHITESPACE, add_special_tokens=False)) + 1
    assert slow_clean == fast.encode(normalize(WHITESPACE), add_special_tokens=False)
