"""The tokenizer megatron-core's dataset is handed: the model's own, with no pad role that names a real token.

Why: megatron-core's ``GPTDataset`` drops every position whose label is the tokenizer's ``pad`` id from the loss and
rewrites that id to 0; Qwen 2.5 names its EOS as pad, so every end of document would be fed as 0 and never trained
on. The frameworks read the pad role from the tokenizer files, so the vendor launchers get the same files with no pad
named (:func:`dataset_tokenizer_dir`): every position stays in the loss, as for ``tran`` (docs/SAMPLE_ORDER.md).
Vocabulary, ids, EOS and BOS are unchanged (checked after writing); no framework file is patched.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utils.dataset.paths import load_tokenizer, vocab_size
from utils.io.atomic import temp_sibling
from utils.io.hashing import sha256_dir
from utils.io.json_input import read_json

CONFIG_FILES = ("tokenizer_config.json", "special_tokens_map.json")


class TokenizerRoleError(ValueError):
    """A tokenizer the pipeline cannot use as it is (an EOS outside its vocabulary)."""


@dataclass(frozen=True)
class PadRole:
    """The tokenizer's pad token, and whether the data can hold its id (then the dataset would mangle it)."""

    token: str | None
    id: int | None
    eos: str | None
    collides: bool  # the pad is the EOS, the BOS or UNK, or a token that text encodes to

    def note(self, name: str) -> str | None:
        """One line for the launch notes when the pad names a real token; None otherwise."""
        if not self.collides:
            return None
        what = f"its EOS {self.eos}" if self.token == self.eos else "a real token"
        return (f"tokenizer {name}: pad token {self.token} (id {self.id}) is {what}, which megatron-core's dataset "
                "would mask and rewrite to 0; the vendor stacks get a copy that names no pad token")


def pad_role(tokenizer: Any) -> PadRole:
    """What ``tokenizer`` (a loaded Hugging Face tokenizer) names as pad, as the frameworks read it."""
    token = getattr(tokenizer, "pad_token", None)
    pad_id = None if token is None else tokenizer.convert_tokens_to_ids(token)
    data_roles = {getattr(tokenizer, f"{role}_token_id", None) for role in ("eos", "bos", "unk")} - {None}
    dedicated = pad_id in tokenizer.added_tokens_decoder and tokenizer.added_tokens_decoder[pad_id].special
    collides = pad_id is not None and (pad_id in data_roles or not dedicated)
    return PadRole(token=token, id=pad_id, eos=getattr(tokenizer, "eos_token", None), collides=collides)


def check_eos(tokenizer: Any, directory: Path) -> int:
    """The EOS id, or :class:`TokenizerRoleError` naming the token when the files' vocabulary lacks it. Read from the
    files, not only the loaded tokenizer: transformers 5 silently appends an unknown EOS to the vocabulary, giving it an
    id the model's embedding was not sized for."""
    eos = getattr(tokenizer, "eos_token", None)
    if eos is None:
        raise TokenizerRoleError(f"tokenizer {directory} names no EOS token, so documents cannot end with EOD")
    spec_path = Path(directory) / "tokenizer.json"
    if spec_path.is_file():
        spec = read_json(spec_path)
        if not isinstance(spec, dict):
            raise TokenizerRoleError(f"tokenizer {directory}: tokenizer.json is not a JSON object")
        known = set((spec.get("model") or {}).get("vocab") or {}) | {
            added.get("content") for added in spec.get("added_tokens") or []}
        if eos not in known:
            raise TokenizerRoleError(f"tokenizer {directory}: its EOS token {eos} is not in its vocabulary")
    eos_id = tokenizer.convert_tokens_to_ids(eos)
    if eos_id is None or not 0 <= eos_id < vocab_size(tokenizer):
        raise TokenizerRoleError(f"tokenizer {directory}: its EOS token {eos} is not in its vocabulary")
    return int(eos_id)


def _without_pad(directory: Path) -> None:
    """Remove the pad role from the files ``AutoTokenizer`` reads it from (in place, in a fresh copy)."""
    for name in CONFIG_FILES:
        path = directory / name
        if path.is_file():
            content = read_json(path)
            if name == "tokenizer_config.json":
                content["pad_token"] = None
            else:
                content.pop("pad_token", None)
            path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    spec_path = directory / "tokenizer.json"
    if spec_path.is_file():
        spec = read_json(spec_path)
        if spec.get("padding") is not None:  # a fast tokenizer takes its pad from here when the config names none
            spec["padding"] = None
            spec_path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")


def _check_copy(source: Any, copy: Any, where: Path) -> None:
    same = (vocab_size(copy) == vocab_size(source) and copy.eos_token_id == source.eos_token_id
            and copy.bos_token_id == source.bos_token_id and copy.get_vocab() == source.get_vocab())
    if copy.pad_token is not None or not same:
        raise TokenizerRoleError(f"{where}: the copy without a pad role does not load as the original with no pad "
                                 f"(pad {copy.pad_token!r}, {vocab_size(copy)} tokens)")


def framework_tokenizer(source: Path, output_dir: Path, write: bool = True) -> tuple[Path, str | None]:
    """What the vendor launchers name as the tokenizer: (directory, launch note or None). Absent files are named as
    they are (the plan reports missing data); an EOS outside the vocabulary raises :class:`TokenizerRoleError`."""
    source = Path(source)
    if not any((source / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        return source, None
    try:
        load_tokenizer(source)
    except Exception as exc:  # any unreadable file: the framework reports it in its own words
        return source, f"tokenizer {source} could not be read to check its pad role ({type(exc).__name__}: {exc})"
    target = dataset_tokenizer_dir(source, Path(output_dir) / "generated", write=write)
    if target == source:
        return source, None
    return target, f"{pad_role(load_tokenizer(source)).note(str(source))}: {target}"


def dataset_tokenizer_dir(source: Path, generated_dir: Path, write: bool = True) -> Path:
    """The tokenizer directory to hand a framework whose dataset is megatron-core's: ``source`` itself when its pad
    (if any) is no real token, else a copy without a pad role under ``generated_dir``, named by the source's content
    hash (shared by every node and run, written atomically). ``write=False`` (a dry run) only names it."""
    source = Path(source)
    original = load_tokenizer(source)
    check_eos(original, source)
    if not pad_role(original).collides:
        return source
    target = Path(generated_dir) / f"{source.name}-nopad-{sha256_dir(source)[:12]}"
    if write and not target.is_dir():
        tmp = temp_sibling(target)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        _without_pad(tmp)
        _check_copy(original, load_tokenizer(tmp), source)
        try:
            os.replace(tmp, target)
        except OSError:  # another launcher wrote the same copy first
            shutil.rmtree(tmp, ignore_errors=True)
    return target
