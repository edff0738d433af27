"""The offline ``DATASET=sample`` corpus and its per-model BPE tokenizers.

Why generated text: CI and the quick benchmark must run the whole pipeline with no
network, yet still exercise what real data exercises: a long-tailed vocabulary,
sentences and documents of very different lengths, non-ASCII text for byte-level
BPE, and the documents ``data/clean.py`` exists to drop (empty, too short,
duplicated, badly spaced). Everything is drawn from :class:`random.Random` seeded
with ``SEED``, whose stream is stable across Python versions, so the same config
gives byte-identical files on every machine.

The tokenizers mimic the real ones where it matters to the pipeline: byte-level BPE
with a Llama-3-style split regex, Llama's ``<|begin_of_text|>`` prepended as BOS and
``<|end_of_text|>`` as EOS, Qwen's NFC normaliser, no BOS and ``<|endoftext|>`` as EOS.
Mistral v0.3's tokenizer is SentencePiece-style instead, and so is its sample: words
marked with ``▁`` (Metaspace), byte fallback to ``<0x00>``..``<0xFF>`` pieces for
characters outside the learnt alphabet, ``<unk>``/``<s>``/``</s>`` at ids 0, 1, 2, ``<s>``
prepended as BOS, ``</s>`` as EOS and no pad token.
They are saved as ``PreTrainedTokenizerFast`` so ``AutoTokenizer.from_pretrained``
loads them exactly like a downloaded tokenizer.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Bump when the generator's output changes, so manifests see a new input.
GENERATOR_VERSION = 1

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


# ---------------------------------------------------------------------------
# tokenizers

# Llama 3's pre-tokenizer split (public in its tokenizer.json): contractions, words,
# numbers in groups of up to three digits, punctuation runs, newlines, spaces.
_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


BYTE_LEVEL, SENTENCEPIECE = "byte-level", "sentencepiece"


@dataclass(frozen=True)
class TokenizerStyle:
    """The model-specific parts of a sample tokenizer."""

    eos: str
    bos: str | None
    extra_special: tuple[str, ...]
    prepend_bos: bool
    nfc: bool
    kind: str = BYTE_LEVEL  # which base BPE the model's tokenizer is made from
    unk: str | None = None
    pad_is_eos: bool = True  # the real Llama/Qwen files name a pad token; Mistral's names none


TOKENIZER_STYLES: dict[str, TokenizerStyle] = {
    "llama": TokenizerStyle(eos="<|end_of_text|>", bos="<|begin_of_text|>",
                            extra_special=("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
                            prepend_bos=True, nfc=False),
    "qwen": TokenizerStyle(eos="<|endoftext|>", bos=None, extra_special=("<|im_start|>", "<|im_end|>"),
                           prepend_bos=False, nfc=True),
    "mistral": TokenizerStyle(eos="</s>", bos="<s>", extra_special=("[INST]", "[/INST]"), prepend_bos=True,
                              nfc=False, kind=SENTENCEPIECE, unk="<unk>", pad_is_eos=False),
}
SENTENCEPIECE_SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2, as in SentencePiece models
BYTE_PIECES = tuple(f"<0x{value:02X}>" for value in range(256))


def _texts(corpus_path: Path) -> Iterator[str]:
    with corpus_path.open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)["text"]


def train_base_tokenizer(corpus_path: Path, vocab_size: int, kind: str = BYTE_LEVEL):
    """Train one BPE of ``kind`` on the corpus; the per-model tokenizers of that kind share its merges.

    Training once per kind (not once per model) keeps the sample pipeline fast; the
    models still differ in special tokens, BOS handling and normalisation.
    """
    if kind == SENTENCEPIECE:
        return _train_sentencepiece_style(corpus_path, vocab_size)
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    tokenizer.train_from_iterator(_texts(corpus_path), trainer=trainer)
    return tokenizer


def _train_sentencepiece_style(corpus_path: Path, vocab_size: int):
    """A BPE over ``▁``-marked words with byte fallback, laid out as a SentencePiece model.

    The trainer puts ``<unk> <s> </s>`` at ids 0-2; the 256 byte pieces are then inserted
    at ids 3-258 as ordinary vocabulary (as in SentencePiece models), so a decode that skips
    special tokens still turns them back into their bytes.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Sequence([
        decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first"),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SENTENCEPIECE_SPECIALS),
                                  show_progress=False)
    tokenizer.train_from_iterator(_texts(corpus_path), trainer=trainer)
    document = json.loads(tokenizer.to_str())
    learnt = sorted(document["model"]["vocab"].items(), key=lambda item: item[1])
    pieces = [*SENTENCEPIECE_SPECIALS, *BYTE_PIECES,
              *(piece for piece, _ in learnt if piece not in SENTENCEPIECE_SPECIALS and piece not in BYTE_PIECES)]
    document["model"]["vocab"] = {piece: index for index, piece in enumerate(pieces)}
    for added in document["added_tokens"]:  # <unk> <s> </s> keep ids 0-2
        added["id"] = document["model"]["vocab"][added["content"]]
    return Tokenizer.from_str(json.dumps(document))


def save_model_tokenizer(base, model: str, out_dir: Path) -> None:
    """Give the base BPE a model's special tokens and save it for ``AutoTokenizer``."""
    from tokenizers import Tokenizer, normalizers, processors
    from transformers import PreTrainedTokenizerFast

    style = TOKENIZER_STYLES[model]
    tokenizer = Tokenizer.from_str(base.to_str())
    specials = [token for token in (style.unk, style.bos, style.eos, *style.extra_special) if token]
    tokenizer.add_special_tokens(specials)
    if style.nfc:
        tokenizer.normalizer = normalizers.NFC()
    if style.prepend_bos and style.bos:
        bos_id = tokenizer.token_to_id(style.bos)
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{style.bos} $A", pair=f"{style.bos} $A {style.bos} $B", special_tokens=[(style.bos, bos_id)]
        )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=style.bos,
        eos_token=style.eos,
        unk_token=style.unk,
        pad_token=style.eos if style.pad_is_eos else None,
        clean_up_tokenization_spaces=False,
        model_max_length=131072,
    )
    wrapped.save_pretrained(str(out_dir))
    # transformers 5 records its own class name ("TokenizersBackend"), which the 4.x releases in the
    # NeMo and Primus images cannot load; the generic fast-tokenizer class loads under both.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
