"""Which special tokens ``data/encode.py`` writes around each document: the ``BOS_POLICY`` setting.

The ids ``tools/preprocess_data.py --append-eod`` writes depend on Megatron's version: at ``MEGATRON_REF`` its
``HuggingFaceTokenizer.text_to_ids`` is ``tokenize`` + ``convert_tokens_to_ids`` (no BOS), up to core_v0.12.0 it was
``tokenizer(text).input_ids`` (Llama 3.1's ``<|begin_of_text|>`` first). So:

* ``megatron`` (default): ``tokenizer(text, add_special_tokens=False)`` + EOD, byte-identical to
  ``preprocess_data@847781764f`` (tests/conformance/test_conformance_preprocess_data.py);
* ``tokenizer``: ``tokenizer(text)`` + EOD, as ``preprocess_data@core_v0.12.0`` wrote.

docs/SAMPLE_ORDER.md ("BOS") says why the default is fair to every framework.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from data.common import DataError

POLICIES = ("megatron", "tokenizer")
# The Megatron-LM version whose preprocess_data output each policy reproduces byte for byte.
MATCHES = {"megatron": "preprocess_data@847781764f", "tokenizer": "preprocess_data@core_v0.12.0"}


class TokenPolicy(BaseModel):
    """The special tokens of an encoded dataset, as recorded in its encode manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    policy: Literal["megatron", "tokenizer"]
    bos: bool  # each document starts with the tokenizer's BOS
    eod: bool  # each non-empty document ends with the eos id (--append-eod)
    matches: str  # the preprocess_data version that writes the same bytes

    def describe(self) -> str:
        return (f"BOS_POLICY={self.policy} ({'BOS + ' if self.bos else 'no BOS, '}"
                f"{'EOD' if self.eod else 'no EOD'}, as {self.matches})")


def adds_specials(policy: str) -> bool:
    """Whether the tokenizer's own post-processor runs (``add_special_tokens``) under ``policy``."""
    if policy not in POLICIES:
        raise DataError(f"BOS_POLICY={policy!r}: unknown (choose {' or '.join(POLICIES)})")
    return policy == "tokenizer"


def record(policy: str, prefix: tuple[int, ...]) -> TokenPolicy:
    """The manifest's record of ``policy`` for a tokenizer that puts ``prefix`` before a document's ids."""
    adds_specials(policy)
    return TokenPolicy(policy=policy, bos=bool(prefix), eod=True, matches=MATCHES[policy])


def mismatch(recorded: TokenPolicy | None, wanted: str) -> str | None:
    """None when a dataset encoded under ``recorded`` is what ``BOS_POLICY=wanted`` trains on; else why not."""
    if recorded is None:
        return (f"records no token policy (encoded before BOS_POLICY existed); the config asks for "
                f"BOS_POLICY={wanted} ({MATCHES.get(wanted, '?')})")
    if recorded.policy != wanted or recorded.matches != MATCHES.get(wanted):
        return f"was encoded with {recorded.describe()}, but the config asks for BOS_POLICY={wanted}"
    return None
