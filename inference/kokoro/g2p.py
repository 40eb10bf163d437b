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
English G2P. Phoneme links `[word](/phonemes/)` give a word's phonemes directly, in every language.

Spanish, French, Hindi, Italian and Brazilian Portuguese go through espeak-ng (`espeak`), Japanese
through misaki's cutlet reader (`japanese`), as KPipeline does. Which G2P reads a word follows its
script, then the row's language (`languages`): kana is Japanese, Devanagari Hindi, Han characters
Mandarin (Japanese in a Japanese row or beside kana), Latin script the row's language where
espeak-ng reads it, else English. A segment in one script goes whole to its G2P; a mixed one is cut
into runs of each script.

The output keeps words apart (`Token`: the word as written, its phonemes, whether a space follows)
so that word timings can be computed from the predicted durations; symbols outside Kokoro v1.0's
vocabulary are dropped here, so that each phoneme left is exactly one model input.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from ..text.preparation import PHONEME_LINK
from . import espeak, heteronyms, japanese
from .phonemes import Token, known, punctuation

CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Latin words (with inner apostrophes, hyphens, digits and single spaces) inside Chinese text.
LATIN_RUN = re.compile(r"[A-Za-z0-9\u00c0-\u024f]+(?:['’\-. ]*[A-Za-z0-9\u00c0-\u024f]+)*")
_KANA = "\u3040-\u30ff\u31f0-\u31ff"
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
KANA = re.compile(f"[{_KANA}]")
# Japanese: kana, Han characters, the prolonged sound mark and iteration marks, and Japanese
# punctuation (misaki's cutlet reads it), read as one run.
JAPANESE_RUN = re.compile(f"[{_KANA}{_HAN}々〆ー、。「」『』！？・]+")
# Hindi words, with the digits and spaces between them (espeak-ng says Hindi's numbers itself).
DEVANAGARI_RUN = re.compile(r"[\u0900-\u097f]+(?:[\s0-9.,%]*[\u0900-\u097f]+)*")
_OTHER_SCRIPTS = re.compile(f"[{_KANA}{_HAN}\u0900-\u097f]")
_EAST = re.compile(f"[{_KANA}{_HAN}]")
# Whether a text has a script's letters (a Latin run may be digits alone).
_SCRIPT = {
    CJK_RUN: CJK_RUN,
    JAPANESE_RUN: re.compile(f"[{_KANA}{_HAN}]"),
    DEVANAGARI_RUN: re.compile(r"[\u0900-\u097f]"),
    LATIN_RUN: re.compile(r"[A-Za-z\u00c0-\u024f]"),
}
ENGLISH = ("en-us", "en-gb")
PACKAGES = (
    "misaki",
    "espeakng-loader",
    "phonemizer-fork",
    "jieba",
    "pypinyin",
    "fugashi",
    "unidic-lite",
    "jaconv",
    "mojimoji",
)

# The blank pipeline has no tagger: these are the Penn Treebank tags spaCy's tagger gives
# punctuation, which misaki reads to keep it (a pause) instead of gluing it to a word.
_PUNCT_TAGS = {",": ",", ".": ".", "!": ".", "?": ".", ":": ":", ";": ":", "…": ":", "...": ":", "—": ":"}
_PUNCT_TAGS |= {"--": ":", "(": "-LRB-", ")": "-RRB-", "“": "``", "”": "''", "$": "$", "£": "$", "€": "$", "#": "#"}


def english_pipeline() -> str:
    """The spaCy pipeline the English G2P uses: "en_core_web_sm" when installed, else "blank"."""
    import spacy  # noqa: PLC0415  (spaCy loads in worker processes only)

    return "en_core_web_sm" if spacy.util.is_package("en_core_web_sm") else "blank"


def versions() -> str:
    """What the phonemes depend on (part of the model version): misaki, its English pipeline, the
    espeak-ng library and its wrapper, jieba and pypinyin, MeCab and its dictionary (Japanese)."""
    parts = []
    for package in PACKAGES:
        try:
            parts.append(f"{package}-{importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package}-none")
    pipeline = english_pipeline()
    if pipeline != "blank":
        pipeline += "-" + importlib.metadata.version(pipeline)
    else:
        pipeline += f"-{heteronyms.VERSION}"  # the blank pipeline's heteronym rules
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
                heteronyms.tag(mtokens)  # no tagger: heteronyms by the word before them
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


def _runs(accent: str, language: str, text: str) -> list[tuple[re.Pattern, Callable[[str], list[Token]]]]:
    """Which G2P reads which script in a row of `language`: kana (and, in a Japanese row or text
    with kana, Han characters) Japanese; Han characters Mandarin; Devanagari Hindi; Latin script
    the row's language where espeak-ng reads it (es, fr, it, pt-br), else English in `accent`."""
    east: tuple[re.Pattern, Callable[[str], list[Token]]] = (CJK_RUN, _chinese_words)
    if KANA.search(text) or (language == "ja" and CJK_RUN.search(text)):
        east = (JAPANESE_RUN, japanese.phonemize)
    if language in espeak.LATIN:
        latin: Callable[[str], list[Token]] = functools.partial(espeak.phonemize, language=language)
    else:
        latin = functools.partial(english, accent=accent)
    return [east, (DEVANAGARI_RUN, functools.partial(espeak.phonemize, language="hi")), (LATIN_RUN, latin)]


def _part(text: str, accent: str, language: str) -> list[Token]:
    """Text between phoneme links: written in one script, read whole by its G2P (its punctuation
    in context); else cut into runs of each script, each read by its own."""
    runs = _runs(accent, language, text)
    present = [(pattern, read) for pattern, read in runs if _SCRIPT[pattern].search(text)]
    if len(present) == 1 and present[0][0] is not CJK_RUN:
        return present[0][1](text)
    if runs[0][0] is CJK_RUN and CJK_RUN.search(text):
        from misaki.zh import ZHG2P  # noqa: PLC0415  (worker processes only)

        text = ZHG2P.map_punctuation(text)  # "，" -> ", " ...: the punctuation Kokoro reads
    return _mixed(text, [(pattern, read) for pattern, read in runs if pattern.search(text)])


def _mixed(text: str, runs: list[tuple[re.Pattern, Callable[[str], list[Token]]]]) -> list[Token]:
    """Text in several scripts: each run to its G2P, punctuation between them kept."""
    tokens: list[Token] = []
    pos = 0
    found = sorted(((m, read) for pattern, read in runs for m in pattern.finditer(text)), key=lambda r: r[0].start())
    for m, read in found:
        if m.start() < pos:
            continue
        tokens += punctuation(text[pos : m.start()])
        words = read(m.group())
        if words:
            # A run's last word is followed by what the text has after it (set by what comes next).
            words[-1] = Token(words[-1].text, words[-1].phonemes, text[m.end() : m.end() + 1].isspace())
        tokens += words
        pos = m.end()
    tokens += punctuation(text[pos:])
    return _space_between_words(tokens)


def _is_word(token: Token) -> bool:
    return any(ch.isalnum() for ch in token.text)


def _space_between_words(tokens: list[Token]) -> list[Token]:
    """A space between two words of different runs ("用" "SQL"), so that their phonemes stay apart
    (two Japanese words keep what cutlet gave them: a glottal stop joins its neighbour)."""
    out = list(tokens)
    for i in range(len(out) - 1):
        east = _EAST.search(out[i].text) and _EAST.search(out[i + 1].text)
        if _is_word(out[i]) and _is_word(out[i + 1]) and not out[i].whitespace and not east:
            out[i] = Token(out[i].text, out[i].phonemes, True)
    return out


def phonemize(text: str, accent: str = "en-us", language: str = "") -> list[Token]:
    """`text` (one spelled-out segment) as Kokoro's tokens. `accent`: how English is read;
    `language`: the row's (languages.LANGUAGES; "" is English in `accent`)."""
    language = language or accent
    if language not in espeak.LATIN and not _OTHER_SCRIPTS.search(text):
        return english(text, accent)  # misaki reads phoneme links itself, with their context
    tokens: list[Token] = []
    pos = 0
    for m in PHONEME_LINK.finditer(text):
        tokens += _part(text[pos : m.start()], accent, language)
        if tokens and text[pos : m.start()][-1:].isspace():
            tokens[-1] = Token(tokens[-1].text, tokens[-1].phonemes, True)
        tokens.append(Token(m.group(1), known(m.group(2)), text[m.end() : m.end() + 1].isspace()))
        pos = m.end()
    tokens += _part(text[pos:], accent, language)
    return _space_between_words(tokens)


def warm_up() -> None:
    """Load the dictionaries (English, espeak-ng, jieba, pypinyin; MeCab's when Japanese is
    installed) before the first request."""
    phonemize("Hello.", "en-us")
    phonemize("你好。", "en-us")
    phonemize("Hola.", "en-us", "es")
    if not japanese.missing():
        phonemize("こんにちは。", "en-us", "ja")
