"""The offline ``DATASET=sample`` corpus and its per-model BPE tokenizers.

CI runs the whole pipeline offline, yet exercises what real data does: a long-tailed vocabulary, varied lengths,
non-ASCII text, and the documents ``data/clean.py`` drops. Seeded with ``SEED``, so the same config gives
byte-identical files on every machine. The tokenizers have the real releases' formats over a small learnt
vocabulary, so ``AutoTokenizer.from_pretrained`` loads them as a download.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from data.slow_tokenizer import write_slow_files
from utils.spec.registry import MODELS
from utils.spec.tokenizer import BYTE_LEVEL, LLAMA3_SPLIT_PATTERN, SENTENCEPIECE, SENTENCEPIECE_SPECIALS, TokenizerStyle

# Bump when the generator's output changes, so manifests see a new input.
GENERATOR_VERSION = 3  # 3: the slow-tokenizer files (data/slow_tokenizer.py)

_ONSETS = ("", "b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "kl", "l", "m", "n",
           "p", "pl", "qu", "r", "s", "sh", "sk", "st", "t", "th", "tr", "v", "w", "y", "z")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oo", "ou", "y")
_CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "rk", "st", "th", "x")
# Non-ASCII words so byte-level BPE sees multi-byte UTF-8 (accents, CJK, Cyrillic, emoji).
_FOREIGN = ("café", "naïve", "façade", "São Paulo", "Zürich", "smörgåsbord", "東京", "北京大学",
            "データ", "Москва", "привет", "Ελλάδα", "🙂", "🚀", "—", "…", "½", "€42")
_FUNCTION_WORDS = ("the", "of", "and", "to", "a", "in", "is", "that", "it", "was", "for", "on", "as",
                   "with", "he", "she", "they", "at", "by", "this", "from", "but", "not", "or", "had")
_ENDINGS = (".", ".", ".", ".", "!", "?", "...", ";")


@dataclass(frozen=True)
class SampleSpec:
    """What determines the corpus: same spec, same bytes."""

    seed: int
    target_bytes: int
    lexicon_size: int = 30000


def _make_lexicon(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.choices((1, 2, 3, 4), weights=(3, 5, 3, 1))[0]
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if len(word) > 1:
            words.add(word)
    return sorted(words)  # sorted: set iteration order must not leak into the output


def _zipf_cum_weights(size: int, exponent: float = 1.07) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank ** exponent) for rank in range(1, size + 1)))


class _Writer:
    """Builds sentences and documents from one seeded stream."""

    def __init__(self, spec: SampleSpec) -> None:
        self.rng = random.Random(spec.seed)
        self.lexicon = list(_FUNCTION_WORDS) + _make_lexicon(self.rng, spec.lexicon_size)
        self.cum_weights = _zipf_cum_weights(len(self.lexicon))

    def sentence(self) -> str:
        rng = self.rng
        length = max(1, int(rng.lognormvariate(2.5, 0.55)))  # median ~12 words, long tail
        words = rng.choices(self.lexicon, cum_weights=self.cum_weights, k=length)
        if rng.random() < 0.15:
            words[rng.randrange(length)] = rng.choice(_FOREIGN)
        if rng.random() < 0.10:
            words[rng.randrange(length)] = str(rng.randint(0, 10 ** rng.randint(1, 6)))
        if length > 6 and rng.random() < 0.25:
            words[rng.randrange(1, length - 1)] += ","
        words[0] = words[0][:1].upper() + words[0][1:]
        text = " ".join(words) + rng.choice(_ENDINGS)
        if rng.random() < 0.05:
            text = f'"{text}"'
        return text

    def document(self) -> str:
        rng = self.rng
        paragraphs = []
        for _ in range(max(1, int(rng.lognormvariate(0.7, 0.8)))):
            count = max(1, int(rng.lognormvariate(1.3, 0.7)))
            paragraphs.append(" ".join(self.sentence() for _ in range(count)))
        return "\n\n".join(paragraphs)

    def messy(self, text: str) -> str:
        """Whitespace and Unicode noise that clean.py must normalise away."""
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0:
            return "  " + text.replace(" ", "   ", 3) + " \t\n"
        if choice == 1:
            return text.replace("\n\n", "\r\n\r\n\r\n")
        if choice == 2:
            return text.replace(" ", "\u00a0", 2)
        return text.replace("é", "e\u0301")  # decomposed form: NFC must recompose it


def generate_documents(spec: SampleSpec) -> Iterator[str]:
    """Yield raw documents until about ``spec.target_bytes`` of UTF-8 text has been produced."""
    writer = _Writer(spec)
    rng = writer.rng
    produced = 0
    recent: list[str] = []
    while produced < spec.target_bytes:
        roll = rng.random()
        if roll < 0.01:
            text = rng.choice(("", "   ", "\n\t\n"))  # empty after cleaning
        elif roll < 0.03:
            text = rng.choice(("Chapter " + str(rng.randint(1, 40)), "* * *", "THE END"))  # too short
        elif roll < 0.05 and recent:
            text = rng.choice(recent)  # exact duplicate of an earlier document
        else:
            text = writer.document()
            if rng.random() < 0.1:
                text = writer.messy(text)
            recent = [*recent[-63:], text]
        produced += len(text.encode("utf-8"))
        yield text


def write_corpus(spec: SampleSpec, out_path: Path) -> int:
    """Write the corpus as JSONL (``{"text": ...}`` per line) and return the document count."""
    count = 0
    with out_path.open("w", encoding="utf-8") as out:
        for text in generate_documents(spec):
            out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            count += 1
    return count


BYTE_PIECES = tuple(f"<0x{value:02X}>" for value in range(256))


def _texts(corpus_path: Path) -> Iterator[str]:
    with corpus_path.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)["text"]


def train_base_tokenizer(corpus_path: Path, vocab_size: int, kind: str = BYTE_LEVEL):
    """Train one BPE of ``kind`` on the corpus; the per-model tokenizers of that kind share its merges (one training
    per kind keeps the sample pipeline fast)."""
    return train_base_tokenizer_on(_texts(corpus_path), vocab_size, kind)


def train_base_tokenizer_on(texts: Iterable[str], vocab_size: int, kind: str = BYTE_LEVEL):
    """:func:`train_base_tokenizer` over texts in memory (the tests' small tokenizers)."""
    if kind == SENTENCEPIECE:
        return _train_sentencepiece_style(texts, vocab_size)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _byte_level_split(LLAMA3_SPLIT_PATTERN)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def _train_sentencepiece_style(texts: Iterable[str], vocab_size: int):
    """A BPE over ``▁``-marked words with byte fallback, laid out as Mistral v0.3's SentencePiece model. The 256 byte
    pieces follow the special tokens as ordinary vocabulary, so a decode that skips special tokens still turns them back
    into their bytes."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Sequence([
        decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first"),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SENTENCEPIECE_SPECIALS),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    document = json.loads(tokenizer.to_str())
    learnt = sorted(document["model"]["vocab"].items(), key=lambda item: item[1])
    pieces = [*SENTENCEPIECE_SPECIALS, *BYTE_PIECES,
              *(piece for piece, _ in learnt if piece not in SENTENCEPIECE_SPECIALS and piece not in BYTE_PIECES)]
    document["model"]["vocab"] = {piece: index for index, piece in enumerate(pieces)}
    for added in document["added_tokens"]:  # the special tokens keep ids 0-9
        added["id"] = document["model"]["vocab"][added["content"]]
    return Tokenizer.from_str(json.dumps(document))


def _byte_level_split(pattern: str):
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def _post_processor(style: TokenizerStyle, bos_id: int | None):
    """The release's post-processor: Llama 3.1 and Mistral prepend BOS, Qwen's only fixes offsets."""
    bos_template = None
    if style.prepend_bos and style.bos and bos_id is not None:
        bos_template = processors.TemplateProcessing(
            single=f"{style.bos}:0 $A:0", pair=f"{style.bos}:0 $A:0 {style.bos}:1 $B:1",
            special_tokens=[(style.bos, bos_id)])
    if style.kind == SENTENCEPIECE:
        return bos_template
    offsets = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    return processors.Sequence([offsets, bos_template]) if bos_template else offsets


def _added_token(content: str, special: bool = True) -> dict[str, Any]:
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special}


def tokenizer_config(style: TokenizerStyle, ids: dict[str, int]) -> dict[str, Any]:
    """``tokenizer_config.json`` with the release's keys: the roles of the special tokens and the class."""
    config: dict[str, Any] = {
        "added_tokens_decoder": {str(ids[token]): _added_token(token) for token in style.specials},
        "bos_token": style.bos, "eos_token": style.eos, "tokenizer_class": style.tokenizer_class,
    }
    config.update({role: token for role, token in (("pad_token", style.pad), ("unk_token", style.unk)) if token})
    config.update(dict(style.config))  # Llama 3.1's file has no pad key at all, Mistral's says null
    return dict(sorted(config.items()))


def _special_tokens_map(style: TokenizerStyle) -> dict[str, Any]:
    roles = {"bos_token": style.bos, "eos_token": style.eos, "pad_token": style.pad, "unk_token": style.unk}
    mapping: dict[str, Any] = {role: {key: value for key, value in _added_token(token).items() if key != "special"}
                               for role, token in roles.items() if token is not None}
    extra = dict(style.config).get("additional_special_tokens")
    if extra:
        mapping["additional_special_tokens"] = extra
    return dict(sorted(mapping.items()))


def save_model_tokenizer(base, model: str, out_dir: Path) -> None:
    """Give the base BPE a model's special tokens, post-processor and config; save it as the release is saved. The
    config files are written with the release's keys, not by ``save_pretrained`` (transformers 5 records a class name
    the images' 4.x cannot load); the slow class's files come last (``data/slow_tokenizer.py``)."""

    style = MODELS[model].tokenizer
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.add_special_tokens(list(style.specials))
    if style.nfc:
        tokenizer.normalizer = normalizers.NFC()
    if style.kind == BYTE_LEVEL:
        tokenizer.pre_tokenizer = _byte_level_split(style.split_pattern)
    ids = {token: tokenizer.token_to_id(token) for token in style.specials}
    tokenizer.post_processor = _post_processor(style, ids.get(style.bos) if style.bos else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    for name, content in (("tokenizer_config.json", tokenizer_config(style, ids)),
                          ("special_tokens_map.json", _special_tokens_map(style))):
        (out_dir / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    write_slow_files(out_dir, style.tokenizer_class, unk=style.unk, bos=style.bos, eos=style.eos)
