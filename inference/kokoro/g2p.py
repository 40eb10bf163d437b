"""Kokoro's grapheme-to-phoneme step: text to the phonemes it reads, word by word, offline.

Kokoro reads phonemes (misaki's alphabet), not letters. English goes through misaki's `en.G2P`
(its gold and silver dictionaries, espeak-ng for words they lack, through the bundled
`espeakng-loader` library). misaki loads spaCy's `en_core_web_sm` for part-of-speech tags and
*downloads it* when it is missing; we never let it: we load `en_core_web_sm` when it is installed
(`python -m spacy download en_core_web_sm` on a machine with internet), else a blank spaCy English
pipeline (tokenizer only: each word gets its default pronunciation, so "read" is always read as
the present tense), with punctuation tagged by rule so that pauses survive. `english_pipeline()`
says which one runs; it is part of the model version.

Chinese goes through misaki's v1.0 path (jieba words, pypinyin, misaki's pinyin-to-IPA), word by
word. misaki's Chinese G2P passes Latin letters through raw (v1.0) or drops them (v1.1), so text
with Chinese in it is cut into CJK, Latin and punctuation runs here, and Latin runs go to the
English G2P. Phoneme links `[word](/phonemes/)` give a word's phonemes directly, in both.

The output keeps words apart (`Token`: the word as written, its phonemes, whether a space follows)
so that word timings can be computed from the predicted durations; symbols outside Kokoro v1.0's
vocabulary are dropped here, so that each phoneme left is exactly one model input.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any

from ..text import PHONEME_LINK

# Kokoro v1.0's phoneme vocabulary (config.json "vocab"): StyleTTS 2's symbol table (pad "$" 0,
# punctuation, letters, IPA) with the symbols Kokoro does not use left out and a few slots given to
# misaki's own symbols (affricates ʣ ʥ ʦ ʨ ꭧ, diphthongs A I O Q W Y, flap T, ᵊ, ᵝ, tones ↓→↗↘).
_PUNCTUATION = {";": 1, ":": 2, ",": 3, ".": 4, "!": 5, "?": 6, "—": 9, "…": 10, '"': 11, "(": 12, ")": 13}
_QUOTES_SPACE = {"“": 14, "”": 15, " ": 16}
_MISAKI = dict(zip(["\u0303", "ʣ", "ʥ", "ʦ", "ʨ", "ᵝ", "\uab67"], range(17, 24), strict=True))
_CAPITALS = {"A": 24, "I": 25, "O": 31, "Q": 33, "S": 35, "T": 36, "W": 39, "Y": 41, "ᵊ": 42}
_LETTERS = {c: 43 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz") if c != "g"}  # g: ɡ (92)
_IPA_TABLE = "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘"
_IPA_KEPT = frozenset("ɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘")
_IPA = {c: 69 + i for i, c in enumerate(_IPA_TABLE) if c in _IPA_KEPT}
VOCAB: dict[str, int] = {**_PUNCTUATION, **_QUOTES_SPACE, **_MISAKI, **_CAPITALS, **_LETTERS, **_IPA, "ᵻ": 177}
N_TOKEN = 178

CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Latin words (with inner apostrophes, hyphens, digits and single spaces) inside Chinese text.
LATIN_RUN = re.compile(r"[A-Za-z0-9\u00c0-\u024f]+(?:['’\-. ]*[A-Za-z0-9\u00c0-\u024f]+)*")
ENGLISH = ("en-us", "en-gb")

# The blank pipeline has no tagger: these are the Penn Treebank tags spaCy's tagger gives
# punctuation, which misaki reads to keep it (a pause) instead of gluing it to a word.
_PUNCT_TAGS = {",": ",", ".": ".", "!": ".", "?": ".", ":": ":", ";": ":", "…": ":", "...": ":", "—": ":"}
_PUNCT_TAGS |= {"--": ":", "(": "-LRB-", ")": "-RRB-", "“": "``", "”": "''", "$": "$", "£": "$", "€": "$", "#": "#"}


@dataclass(frozen=True)
class Token:
    """A word (or punctuation) as written, the phonemes Kokoro reads for it, and whether a space
    follows it."""

    text: str
    phonemes: str
    whitespace: bool


def known(phonemes: str) -> str:
    """`phonemes` without the symbols Kokoro v1.0 has no input for."""
    return "".join(c for c in phonemes if c in VOCAB)


def english_pipeline() -> str:
    """The spaCy pipeline the English G2P uses: "en_core_web_sm" when installed, else "blank"."""
    import spacy  # noqa: PLC0415  (spaCy loads in worker processes only)

    return "en_core_web_sm" if spacy.util.is_package("en_core_web_sm") else "blank"


def versions() -> str:
    """What the phonemes depend on (part of the model version): misaki, its English pipeline, the
    espeak-ng library, jieba and pypinyin."""
    parts = []
    for package in ("misaki", "espeakng-loader", "jieba", "pypinyin"):
        try:
            parts.append(f"{package}-{importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package}-none")
    pipeline = english_pipeline()
    if pipeline != "blank":
        pipeline += "-" + importlib.metadata.version(pipeline)
    return "+".join([*parts, f"spacy-{pipeline}"])


_lock = threading.Lock()
_english: dict[str, Any] = {}


def _english_g2p(english: str):
    """misaki's English G2P for an accent, built once per process (its dictionaries take ~1 s)."""
    if english not in ENGLISH:
        raise ValueError(f"english must be one of {ENGLISH}, not {english!r}")
    with _lock:
        if english not in _english:
            _english[english] = _build_english(british=english == "en-gb")
        return _english[english]


def _build_english(british: bool):
    import spacy  # noqa: PLC0415  (spaCy and misaki load in worker processes only)
    from misaki import en, espeak  # noqa: PLC0415  (spaCy and misaki load in worker processes only)

    class OfflineG2P(en.G2P):
        """misaki's G2P with its spaCy pipeline chosen here: never `spacy.cli.download`."""

        def __init__(self, nlp, blank: bool) -> None:
            self.version = None  # Kokoro v1.0's phoneme set (KPipeline's default)
            self.british = british
            self.nlp = nlp
            self.blank = blank
            self.lexicon = en.Lexicon(british)
            self.fallback = espeak.EspeakFallback(british=british)
            self.unk = ""  # what neither the dictionaries nor espeak can read is left out, not "❓"

        def tokenize(self, text, tokens, features):
            mtokens = super().tokenize(text, tokens, features)
            if self.blank:
                _tag_punctuation(mtokens)
            return mtokens

    if spacy.util.is_package("en_core_web_sm"):
        return OfflineG2P(spacy.load("en_core_web_sm", enable=["tok2vec", "tagger"]), blank=False)
    return OfflineG2P(spacy.blank("en"), blank=True)


def _tag_punctuation(mtokens) -> None:
    quotes = 0
    for i, tk in enumerate(mtokens):
        if tk.tag:
            continue
        if tk.text == '"':  # straight quotes: opening, then closing
            tk.tag = "``" if quotes % 2 == 0 else "''"
            quotes += 1
        elif tk.text in ("-", "–") and tk.whitespace and (i == 0 or mtokens[i - 1].whitespace):
            tk.tag = ":"  # a dash between spaces; a hyphen inside a word stays part of it
        elif tk.text in _PUNCT_TAGS:
            tk.tag = _PUNCT_TAGS[tk.text]
        elif all(c in ".!?…" for c in tk.text):
            tk.tag = "."


def english(text: str, accent: str = "en-us") -> list[Token]:
    """English text (phoneme links allowed) as tokens."""
    if not text.strip():
        return []
    g2p = _english_g2p(accent)
    # spaCy keeps every string and lexeme it meets: a worker reading distinct texts grew without
    # end. What one text adds is freed when its zone ends (spaCy 3.8's memory zones); misaki's
    # tokens are plain strings, read inside it.
    with g2p.nlp.memory_zone():
        _, mtokens = g2p(text)
        return [Token(t.text, known(t.phonemes or ""), bool(t.whitespace)) for t in mtokens]


_zh_ready = False


def _chinese_words(run: str) -> list[Token]:
    """A run of CJK characters as jieba's words, each with its pinyin read as IPA (misaki's v1.0
    `ZHG2P.legacy_call`, which also puts a space between words)."""
    global _zh_ready
    import jieba  # noqa: PLC0415  (worker processes only: ~1 s to build its dictionary)
    from misaki.zh import ZHG2P  # noqa: PLC0415  (worker processes only)

    if not _zh_ready:
        jieba.setLogLevel(logging.WARNING)
        _zh_ready = True
    words = jieba.lcut(run, cut_all=False)
    # chr(815): misaki's non-syllabic mark, which v1.0 removes.
    return [Token(w, known(ZHG2P.word2ipa(w).replace(chr(815), "")), True) for w in words]


def _punctuation(text: str) -> list[Token]:
    """What lies between words: punctuation Kokoro reads (a pause), spaces as whitespace flags."""
    tokens: list[Token] = []
    for ch in text:
        if ch.isspace():
            if tokens:
                tokens[-1] = Token(tokens[-1].text, tokens[-1].phonemes, True)
            continue
        if ch in VOCAB:
            tokens.append(Token(ch, ch, False))
    return tokens


def _mixed(text: str, accent: str) -> list[Token]:
    """Text with Chinese in it: CJK runs to the Chinese G2P, Latin runs to the English one."""
    from misaki.zh import ZHG2P  # noqa: PLC0415  (worker processes only)

    text = ZHG2P.map_punctuation(text)  # "，" -> ", " ...: the punctuation Kokoro reads
    tokens: list[Token] = []
    pos = 0
    runs = sorted(
        [(m, "zh") for m in CJK_RUN.finditer(text)] + [(m, "en") for m in LATIN_RUN.finditer(text)],
        key=lambda r: r[0].start(),
    )
    for m, kind in runs:
        if m.start() < pos:
            continue
        tokens += _punctuation(text[pos : m.start()])
        words = _chinese_words(m.group()) if kind == "zh" else english(m.group(), accent)
        if words:
            # A run's last word is followed by what the text has after it (set by what comes next).
            words[-1] = Token(words[-1].text, words[-1].phonemes, text[m.end() : m.end() + 1].isspace())
        tokens += words
        pos = m.end()
    tokens += _punctuation(text[pos:])
    return _space_between_words(tokens)


def _is_word(token: Token) -> bool:
    return any(ch.isalnum() for ch in token.text)


def _space_between_words(tokens: list[Token]) -> list[Token]:
    """A space between two words of different runs ("用" "SQL"), so that their phonemes stay apart."""
    out = list(tokens)
    for i in range(len(out) - 1):
        if _is_word(out[i]) and _is_word(out[i + 1]) and not out[i].whitespace:
            out[i] = Token(out[i].text, out[i].phonemes, True)
    return out


def phonemize(text: str, accent: str = "en-us") -> list[Token]:
    """`text` (one spelled-out segment) as Kokoro's tokens. `accent`: how English is read."""
    if not CJK_RUN.search(text):
        return english(text, accent)  # misaki reads phoneme links itself, with their context
    tokens: list[Token] = []
    pos = 0
    for m in PHONEME_LINK.finditer(text):
        tokens += _mixed(text[pos : m.start()], accent)
        if tokens and text[pos : m.start()][-1:].isspace():
            tokens[-1] = Token(tokens[-1].text, tokens[-1].phonemes, True)
        tokens.append(Token(m.group(1), known(m.group(2)), text[m.end() : m.end() + 1].isspace()))
        pos = m.end()
    tokens += _mixed(text[pos:], accent)
    return _space_between_words(tokens)


def warm_up() -> None:
    """Load the dictionaries (English, espeak-ng, jieba, pypinyin) before the first request."""
    phonemize("Hello.", "en-us")
    phonemize("你好。", "en-us")
