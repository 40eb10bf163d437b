"""Spanish, French, Hindi, Italian and Brazilian Portuguese to Kokoro's phonemes, offline, word by
word: espeak-ng through misaki's `EspeakG2P`, the G2P KPipeline uses for these languages.

espeak-ng is the library and data bundled by the `espeakng-loader` wheel (GPL-3.0), loaded into
the worker process (misaki loads it for English words outside its dictionaries too). EspeakG2P
reads a text as one string of phonemes; here each clause (the words between two punctuation marks)
is read whole, so that what joins words (French liaison) stays, and its words are matched one for
one to espeak's; where espeak joins or splits words (the counts differ), each word is read alone.
Punctuation Kokoro reads stays (a pause); what it has no input for is dropped.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from .phonemes import Token, known, punctuation

# Our language codes as espeak-ng's voices (KPipeline's LANG_CODES).
VOICES = {"es": "es", "fr": "fr-fr", "hi": "hi", "it": "it", "pt-br": "pt-br"}
LATIN = ("es", "fr", "it", "pt-br")  # the ones written in Latin script
# A word: letters and digits (Devanagari's vowel signs and virama are marks, not letters), with
# inner apostrophes and hyphens ("l'ami", "est-ce").
WORD = re.compile(r"[\w\u0900-\u097f]+(?:['’\-][\w\u0900-\u097f]+)*")
# Marks Kokoro has no input for, as the ones it reads: guillemets as quotes, the danda as a stop;
# Spanish's opening ¡ ¿ are not read (the closing mark gives the pause and the tone).
_MARKS = str.maketrans({"«": "“", "»": "”", "¡": " ", "¿": " ", "।": ".", "॥": ".", "–": "—"})

_lock = threading.Lock()  # espeak-ng is one library with global state: one reader at a time
_g2ps: dict[str, Any] = {}


def _g2p(language: str):
    if language not in VOICES:
        raise ValueError(f"espeak-ng reads {sorted(VOICES)} here, not {language!r}")
    if language not in _g2ps:
        from misaki import espeak  # noqa: PLC0415  (espeak-ng loads in worker processes only)

        _g2ps[language] = espeak.EspeakG2P(language=VOICES[language])
    return _g2ps[language]


def phonemize(text: str, language: str) -> list[Token]:
    """`text` (spelled out) read in `language` ("es", "fr", "hi", "it", "pt-br") as tokens."""
    text = text.translate(_MARKS)
    tokens: list[Token] = []
    clause: list[re.Match] = []
    pos = 0
    with _lock:
        g2p = _g2p(language)
        for m in WORD.finditer(text):
            between = text[pos : m.start()]
            if between.strip():  # punctuation ends a clause
                tokens += _clause(g2p, clause, text)
                clause = []
                tokens += punctuation(between)
            clause.append(m)
            pos = m.end()
        tokens += _clause(g2p, clause, text)
    return tokens + punctuation(text[pos:])


def _say(g2p, text: str) -> str:
    phonemes, _ = g2p(text)
    return phonemes.strip()


def _clause(g2p, words: list[re.Match], text: str) -> list[Token]:
    if not words:
        return []
    said = _say(g2p, text[words[0].start() : words[-1].end()]).split()
    if len(said) != len(words):
        # A word espeak reads as several (a number in Hindi, an abbreviation) keeps its spaces.
        said = [_say(g2p, m.group()) for m in words]
    return [Token(m.group(), known(s), text[m.end() : m.end() + 1].isspace()) for m, s in zip(words, said, strict=True)]
