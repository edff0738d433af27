"""A tokenizer directory read with the ``tokenizers`` library alone: what ``data/encode.py`` encodes with.

Importing ``transformers.AutoTokenizer`` costs about 5 s on a 2-core machine, while the ids come from the same
Rust tokenizer. ``data/verify.py`` re-encodes sampled documents of every dataset with ``transformers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from data.common import DataError
from data.token_policy import adds_specials
from utils.dataset.paths import load_tokenizer
from utils.io.json_input import JsonInputError, read_json


class Encoded(dict):
    """``{"input_ids": ...}`` that also reads as ``.input_ids``, like ``transformers``' ``BatchEncoding``."""

    @property
    def input_ids(self) -> Any:
        return self["input_ids"]


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _special_names(directory: Path) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the config wins, as in transformers
        path = directory / name
        if not path.is_file():
            continue
        try:
            data = read_json(path)  # a downloaded file: bounded in size and depth, one line on any problem
        except JsonInputError as exc:
            raise DataError(f"tokenizer file unusable: {exc}") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}: not a JSON object")
        names.update({key: value for key, value in data.items() if value is not None})
    return names


class FileTokenizer:
    """``tokenizer.json`` + the special tokens its directory names, under one token policy."""

    def __init__(self, directory: Path, policy: str) -> None:
        self.name_or_path = str(directory)
        self.policy_specials = adds_specials(policy)
        path = directory / "tokenizer.json"
        if not directory.is_dir() or not any(directory.iterdir()):
            state = "is empty" if directory.is_dir() else "does not exist"
            raise DataError(f"no tokenizer in {directory} (directory {state}); prepare the data first: "
                            "./shell/run_data.sh (or ./shell/data.sh natively)")
        if not path.is_file():
            raise DataError(f"{directory}: no tokenizer.json (data.encode reads the tokenizers library's file; "
                            "every tokenizer tprimat fetches or generates has one)")
        try:
            self.backend_tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust loader raises its own exception type
            raise DataError(f"{path}: the tokenizers library cannot load it: {str(exc).splitlines()[0]}") from None
        names = _special_names(directory)
        self.eos_token = _token_text(names.get("eos_token")) or _token_text(names.get("sep_token"))
        self.bos_token = _token_text(names.get("bos_token"))
        self.eos_token_id = self._id(self.eos_token)
        self.bos_token_id = self._id(self.bos_token)
        if self.eos_token_id is None:
            shown = f"its eos_token {self.eos_token!r} is not in the vocabulary" if self.eos_token else \
                "it names no eos_token (nor sep_token) in tokenizer_config.json or special_tokens_map.json"
            raise DataError(f"{directory}: the tokenizer has no EOS token to append as EOD ({shown}); every "
                            "BOS_POLICY ends documents with it")
        if self.policy_specials and names.get("add_bos_token") is True and self.bos_token_id is None:
            raise DataError(f"{directory}: BOS_POLICY=tokenizer and the tokenizer asks for a BOS token "
                            f"(add_bos_token), but it has no bos_token in its vocabulary ({self.bos_token!r})")

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self.backend_tokenizer.token_to_id(token)

    def __len__(self) -> int:
        """Ids it can emit, added tokens included: megatron's ``vocab_size`` (``len(tokenizer)``)."""
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def __call__(self, text: str | Sequence[str], add_special_tokens: bool | None = None, **_: Any) -> Encoded:
        specials = self.policy_specials if add_special_tokens is None else add_special_tokens
        if isinstance(text, str):
            return Encoded(input_ids=self.backend_tokenizer.encode(text, add_special_tokens=specials).ids)
        batch = self.backend_tokenizer.encode_batch_fast(list(text), add_special_tokens=specials)
        return Encoded(input_ids=[encoding.ids for encoding in batch])


_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def declared_beyond_file(directory: Path, backend: Any) -> str | None:
    """A token the directory's config declares that ``tokenizer.json`` does not hold (or holds at another id)."""
    names = _special_names(directory)
    declared: list[tuple[str, int | None]] = [(text, None) for key in _SPECIAL_KEYS
                                              if (text := _token_text(names.get(key))) is not None]
    extra = names.get("additional_special_tokens") or names.get("extra_special_tokens") or []
    declared += [(text, None) for item in (extra if isinstance(extra, list) else [])
                 if (text := _token_text(item)) is not None]
    decoder = names.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, item in decoder.items():
            text = _token_text(item)
            if text is not None and str(key).isdigit():
                declared.append((text, int(key)))
    for text, wanted in declared:
        found = backend.token_to_id(text)
        if found is None or (wanted is not None and found != wanted):
            return text
    return None


class PolicyTokenizer:
    """A ``transformers`` tokenizer under a token policy: ``add_special_tokens`` defaults to the policy's choice."""

    def __init__(self, tokenizer: Any, policy: str) -> None:
        self.tokenizer = tokenizer
        self.policy_specials = adds_specials(policy)
        self.name_or_path = tokenizer.name_or_path
        self.backend_tokenizer = getattr(tokenizer, "backend_tokenizer", None)
        self.eos_token_id = tokenizer.eos_token_id
        self.bos_token_id = tokenizer.bos_token_id
        if self.eos_token_id is None:
            raise DataError(f"{self.name_or_path}: the tokenizer has no EOS token to append as EOD; every "
                            "BOS_POLICY ends documents with it")

    def __len__(self) -> int:
        return len(self.tokenizer)

    def __call__(self, text: str | Sequence[str], add_special_tokens: bool | None = None, **_: Any) -> Encoded:
        specials = self.policy_specials if add_special_tokens is None else add_special_tokens
        result = self.tokenizer(text if isinstance(text, str) else list(text), add_special_tokens=specials,
                                return_attention_mask=False)
        return Encoded(input_ids=result["input_ids"])


def load_policy_tokenizer(directory: Path, policy: str) -> FileTokenizer | PolicyTokenizer:
    """:class:`FileTokenizer`, or the ``transformers`` tokenizer when the config adds tokens to the file's."""
    tokenizer = FileTokenizer(directory, policy)
    beyond = declared_beyond_file(directory, tokenizer.backend_tokenizer)
    if beyond is None:
        return tokenizer

    print(f"encode: note: {directory.name}'s config declares {beyond!r}, which tokenizer.json lacks; "
          "loading it with transformers")
    return PolicyTokenizer(load_tokenizer(directory), policy)
