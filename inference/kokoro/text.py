"""Kokoro's text side, without torch: what it reads for a segment, its phonemes cut into pieces that
fit its context, and word timings from the durations it predicts.

`read` spells out numbers, money and dates outside phoneme links, which stay as written, in the
language the G2P will read them in (`g2p`'s routing: script, then the row's language): English and
Chinese with the normaliser every engine shares (`inference.text.preparation.normalize`); Spanish, French,
Italian, Brazilian Portuguese and Japanese with `inference.text.numbers` (num2words); Hindi's digits are
left to espeak-ng, which says them in Hindi. A row's tokens
(`g2p.phonemize`) become one or more `Piece`s of at most MAX_PHONEMES phonemes, cut where
KPipeline cuts (after a sentence end, else a clause, else between words); each piece is one input
of the model. `words` turns a piece's predicted durations (one per input: start, phonemes, end)
into when each word is spoken, as `KPipeline.join_timestamps` does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..batch import Word
from ..text import numbers
from ..text.preparation import PHONEME_LINK, TextError, has_words, normalize, refuse_unknown_tags
from . import japanese
from .phonemes import Token

MODEL = "kokoro"
MAX_PHONEMES = 510  # Kokoro's context: 512 positions, less the start and end inputs
FRAMES_PER_SECOND = 40.0  # one duration unit is 600 samples at 24 kHz
SAMPLES_PER_FRAME = 600
# KPipeline.join_timestamps starts words 3 frames before their first phoneme (its own "TODO: is -3
# an appropriate offset?"); we keep its timings.
EARLY_FRAMES = 3
# Where a piece may end, best first (KPipeline.waterfall_last): a sentence, a clause, a phrase.
CUT_AFTER = ("!.?…", ":;", ",—")


KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
DEVANAGARI = re.compile(r"[\u0900-\u097f]")
# The row's language as inference.text.numbers spells its Latin-script text ("pt" is Brazilian there).
_SPELLED = {"es": "es", "fr": "fr", "it": "it", "pt-br": "pt"}


@functools.lru_cache(maxsize=4096)
def read(segment: str, language: str = "", spell_out: bool = True) -> str:
    """What Kokoro reads for a segment in a row of `language` (languages.LANGUAGES; "": English
    for Latin script): numbers, money and dates spelled out (unless `spell_out` is False: as
    written, left to the G2P) outside phoneme links `[word](/phonemes/)`, which are kept as they
    are. Raises TextError for inline tags (Kokoro has none), for Japanese where its G2P is not
    installed, or when nothing is left to say."""
    refuse_unknown_tags(segment, frozenset(), MODEL)

    def spelled(part: str) -> str:
        return _spelled(part, language) if spell_out else part

    parts, pos = [], 0
    for m in PHONEME_LINK.finditer(segment):
        parts += [spelled(segment[pos : m.start()]), m.group(0)]
        pos = m.end()
    parts.append(spelled(segment[pos:]))
    text = re.sub(r"[ \t]+", " ", "".join(parts)).strip()
    refuse_unknown_tags(text, frozenset(), MODEL)  # whatever normalising made of the text
    if not has_words(text):
        raise TextError("The input has nothing to say once spelled out (only spaces or symbols).")
    return text


def numbers_language(text: str, language: str) -> str:
    """Who spells out `text`'s numbers: "grammars" (English, Chinese), a language of
    `inference.text.numbers` ("es", "fr", "it", "pt", "ja"), or "" (Hindi: espeak-ng reads digits)."""
    if KANA.search(text) or (language == "ja" and HAN.search(text)):
        return "ja"
    if DEVANAGARI.search(text):
        return ""
    if HAN.search(text):
        return "grammars"
    return _SPELLED.get(language, "grammars")


def _spelled(part: str, language: str) -> str:
    if not any(ch.isalnum() for ch in part):
        return part  # punctuation between links: nothing to spell out
    who = numbers_language(part, language)
    if who == "ja" and japanese.missing():
        raise TextError(
            "Kokoro reads Japanese with MeCab and the unidic-lite dictionary, which this worker lacks "
            f"(install {', '.join(japanese.missing())}: requirements/kokoro.txt)."
        )
    lead = part[: len(part) - len(part.lstrip())]
    trail = part[len(part.rstrip()) :]
    if who == "grammars":
        return lead + normalize(part.strip()) + trail
    return lead + (numbers.spell_out(part.strip(), who) if who else part.strip()) + trail


@dataclass(frozen=True)
class Piece:
    """Tokens read as one input of the model: their phonemes joined (a space where the text has
    one), and where each token's phonemes lie in them."""

    tokens: tuple[Token, ...]
    phonemes: str
    spans: tuple[tuple[int, int, int], ...]  # (token index, start, end) in `phonemes`


def assemble(tokens: Sequence[Token]) -> Piece:
    parts: list[str] = []
    spans: list[tuple[int, int, int]] = []
    length, space = 0, False
    for i, t in enumerate(tokens):
        if not t.phonemes:
            space = space or t.whitespace
            continue
        if parts and space:
            parts.append(" ")
            length += 1
        spans.append((i, length, length + len(t.phonemes)))
        parts.append(t.phonemes)
        length += len(t.phonemes)
        space = t.whitespace
    return Piece(tuple(tokens), "".join(parts), tuple(spans))


def pieces(tokens: Sequence[Token]) -> list[Piece]:
    """The row's tokens as pieces of at most MAX_PHONEMES phonemes (one piece for a sentence)."""
    out: list[Piece] = []
    current: list[Token] = []
    for t in tokens:
        if len(t.phonemes) > MAX_PHONEMES:  # one "word" longer than the context: keep what fits
            t = Token(t.text, t.phonemes[:MAX_PHONEMES], t.whitespace)
        if current and len(assemble([*current, t]).phonemes) > MAX_PHONEMES:
            cut = _cut(current, t)
            out.append(assemble(current[:cut]))
            current = current[cut:]
        current.append(t)
    if current and assemble(current).phonemes:
        out.append(assemble(current))
    return out


def _cut(current: list[Token], nxt: Token) -> int:
    """How many of `current` end the piece: after the last sentence end (else clause, else phrase
    end) that leaves the rest room, else all of them."""
    for ends in CUT_AFTER:
        for z in range(len(current) - 1, 0, -1):
            t = current[z - 1]
            if t.phonemes and all(c in ends for c in t.phonemes):
                if len(assemble([*current[z:], nxt]).phonemes) <= MAX_PHONEMES:
                    return z
                break
    return len(current)


def is_word(token: Token) -> bool:
    """A spoken word (captions show it), not punctuation."""
    return bool(token.phonemes) and any(ch.isalnum() for ch in token.text)


def words(piece: Piece, durations: Sequence[int], offset: float = 0.0) -> list[Word]:
    """When each word of `piece` is spoken, in seconds (plus `offset`), from the model's durations
    for [start, phonemes..., end]: a word runs from halfway through the space before it to halfway
    through the space after it (KPipeline.join_timestamps, its 3-frame lead included)."""
    if len(durations) != len(piece.phonemes) + 2:
        raise ValueError(f"{len(durations)} durations for {len(piece.phonemes)} phonemes (+2)")
    cum = [0]
    for d in durations:
        cum.append(cum[-1] + int(d))
    shift = min(EARLY_FRAMES, int(durations[0]))
    out = []
    for i, a, b in piece.spans:
        token = piece.tokens[i]
        if not is_word(token):
            continue
        # Phoneme j of the string is input j + 1 (input 0 is the start).
        start = cum[a + 1] - (int(durations[a]) / 2 if a > 0 and piece.phonemes[a - 1] == " " else 0)
        end = cum[b + 1] + (int(durations[b + 1]) / 2 if b < len(piece.phonemes) and piece.phonemes[b] == " " else 0)
        out.append(
            Word(
                token.text,
                round(offset + max(0.0, start - shift) / FRAMES_PER_SECOND, 4),
                round(offset + max(0.0, end - shift) / FRAMES_PER_SECOND, 4),
            )
        )
    return out
