"""What a model's real tokenizer is: its special tokens, their roles and how its release lays it out.

``data/sample_corpus.py`` builds the offline ``DATASET=sample`` tokenizers from a row's :class:`TokenizerStyle`, so
the frameworks' dataset code meets the tokens and roles a real run meets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BYTE_LEVEL, SENTENCEPIECE = "byte-level", "sentencepiece"

# Llama 3's pre-tokenizer split (public in its tokenizer.json): contractions, words,
# numbers in groups of up to three digits, punctuation runs, newlines, spaces.
LLAMA3_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen 2.5's (its tokenizer.json, and what transformers' Qwen2Tokenizer class rebuilds): digits one by one.
QWEN25_SPLIT_PATTERN = LLAMA3_SPLIT_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")

# Mistral v0.3: <unk> <s> </s> at ids 0-2, then its control tokens (ids 3-9; [control_8].. follow up to 770).
# Every SentencePiece-style sample tokenizer is trained with these at ids 0-9 (data/sample_corpus.py).
SENTENCEPIECE_SPECIALS = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]",
                          "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]")


@dataclass(frozen=True)
class TokenizerStyle:
    """A model's tokenizer as its release lays it out: the special tokens in id order, their roles, what the
    post-processor adds and the ``tokenizer_config.json`` keys ``AutoTokenizer`` reads. Real, because the frameworks'
    dataset code acts on these roles (a pad that is the EOS masks every end of document: docs/SAMPLE_ORDER.md)."""

    eos: str
    bos: str | None
    pad: str | None  # tokenizer_config.json's pad_token: Qwen names its EOS, Llama 3.1 and Mistral name none
    specials: tuple[str, ...]  # every added special token, in the release's id order
    prepend_bos: bool  # the post-processor puts BOS before every text
    nfc: bool
    tokenizer_class: str  # tokenizer_config.json's class, loadable by transformers 4.x and 5.x
    config: tuple[tuple[str, Any], ...] = ()  # the release's further tokenizer_config.json keys
    kind: str = BYTE_LEVEL  # which base BPE the model's tokenizer is made from
    unk: str | None = None
    split_pattern: str = LLAMA3_SPLIT_PATTERN  # byte-level pre-tokenizer's regex
