"""Japanese to Kokoro's phonemes, offline, word by word: misaki's cutlet reader, the path of
KPipeline's `JAG2P()` (its default version).

misaki's `ja` module imports pyopenjtalk (whose dictionary is downloaded on first use) even for
that path, which needs only MeCab (fugashi) with a UniDic dictionary: `misaki.cutlet.Cutlet` is used
directly, with the dictionary of the `unidic-lite` wheel named explicitly (the full `unidic`
package downloads its dictionary, and fugashi would pick it first). MeCab's words, grouped as
cutlet groups them, become tokens (for word timings) with cutlet's readings: kana as misaki's IPA.
Without these packages Japanese is refused by name (`missing`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from typing import Any

from .phonemes import Token, known

PACKAGES = {"fugashi": "fugashi", "unidic_lite": "unidic-lite", "jaconv": "jaconv", "mojimoji": "mojimoji"}

_lock = threading.Lock()  # one MeCab tagger, one reader at a time
_reader: list[Any] = []


def missing() -> list[str]:
    """The packages Japanese needs that this process lacks (their PyPI names)."""
    return [name for module, name in PACKAGES.items() if importlib.util.find_spec(module) is None]


def _cutlet():
    if not _reader:
        import unidic_lite  # noqa: PLC0415  (worker processes only: a 250 MB dictionary)
        from fugashi import Tagger  # noqa: PLC0415  (worker processes only)
        from misaki import cutlet  # noqa: PLC0415  (worker processes only)

        class OfflineCutlet(cutlet.Cutlet):
            """misaki's Cutlet on unidic-lite's dictionary, whatever else is installed."""

            def __init__(self) -> None:
                dicdir = unidic_lite.DICDIR
                self.tagger = Tagger(f'-d "{dicdir}" -r "{os.path.join(dicdir, "mecabrc")}"')
                self.table = dict(cutlet.HEPBURN)
                self.exceptions: dict[str, str] = {}

        _reader.append(OfflineCutlet())
    return _reader[0]


def phonemize(text: str) -> list[Token]:
    """Japanese `text` (numbers spelled out) as tokens: one a word as cutlet groups them."""
    import jaconv  # noqa: PLC0415  (worker processes only)
    from misaki import cutlet  # noqa: PLC0415  (worker processes only)

    with _lock:
        reader = _cutlet()
        words = [
            cutlet.Word(
                w.surface,
                jaconv.kata2hira(w.feature.pron or w.feature.kana or w.surface),
                6 if w.char_type == 7 or not w.is_unk else w.char_type,
            )
            for w in reader.tagger(reader._normalize_text(text))
        ]
        romaji = reader._romaji_tokens(words)
    surfaces = _grouped(words, cutlet.JA_WORDS)
    if len(surfaces) != len(romaji):  # cutlet grouped otherwise: the text as one word
        surfaces, romaji = [text], [cutlet.Token("".join(str(t) for t in romaji), False)]
    tokens: list[Token] = []
    for surface, said in zip(surfaces, romaji, strict=True):
        phonemes = known(re.sub(r"\s+", " ", said.surface).strip())
        if not phonemes:
            if tokens and (said.space or not surface.strip()):
                tokens[-1] = Token(tokens[-1].text, tokens[-1].phonemes, True)
            continue
        tokens.append(Token(surface, phonemes, said.space))
    return _glottal_stops(tokens)


def _grouped(words: list, dictionary: frozenset[str]) -> list[str]:
    """The words as cutlet's `_romaji_tokens` groups them (runs of a kind that spell a word of its
    list, else one MeCab word each): their surfaces, one per token it gives."""
    out, i = [], 0
    while i < len(words):
        z = next((z for z in range(i + 1, len(words)) if words[z].char_type != words[i].char_type), len(words))
        j = next((j for j in range(z, i, -1) if "".join(w.surface for w in words[i:j]) in dictionary), i + 1)
        out.append("".join(w.surface for w in words[i:j]))
        i = j
    return out


def _glottal_stops(tokens: list[Token]) -> list[Token]:
    """A word ending or starting with a glottal stop (っ) is joined to its neighbour, as cutlet
    joins them."""
    out = list(tokens)
    for i in range(len(out) - 1):
        word = any(ch.isalnum() for ch in out[i].text)
        if out[i].phonemes.endswith("ʔ") or (word and out[i + 1].phonemes.startswith("ʔ")):
            out[i] = Token(out[i].text, out[i].phonemes, False)
    return out
