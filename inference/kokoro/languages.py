"""The languages Kokoro v1.0 reads, as its G2P names them, and how a row gets one (pure Python).

A voice's id starts with its language's letter (KPipeline's `lang_code`: `a` American English,
`b` British, `e` Spanish, `f` French, `h` Hindi, `i` Italian, `j` Japanese, `p` Brazilian
Portuguese, `z` Mandarin). A row reads its text in the language of its heaviest voice unless the
request names one (`lang`, an SSML `xml:lang` value such as "fr-FR"): `kokoro_language` maps that
tag to one of `LANGUAGES` or refuses it, naming the languages Kokoro speaks.

Whatever the row's language, text in a script only one language of Kokoro's is written in goes to
that language's G2P (kana: Japanese, Devanagari: Hindi, Han characters: Mandarin, or Japanese in a
Japanese row); the row's language decides how Latin-script text is read.
"""

from __future__ import annotations

LANGUAGES = ("en-us", "en-gb", "zh", "es", "fr", "hi", "it", "ja", "pt-br")
ENGLISH = ("en-us", "en-gb")
NAMES = {
    "en-us": "American English",
    "en-gb": "British English",
    "zh": "Mandarin",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "pt-br": "Brazilian Portuguese",
}
# A voice id's first letter: its language.
BY_PREFIX = {
    "a": "en-us",
    "b": "en-gb",
    "z": "zh",
    "e": "es",
    "f": "fr",
    "h": "hi",
    "i": "it",
    "j": "ja",
    "p": "pt-br",
}
# A tag's primary subtag (ISO 639-1 or -3) for the languages that have one reading whatever the region.
_PRIMARY = {
    "zh": "zh",
    "cmn": "zh",
    "es": "es",
    "spa": "es",
    "fr": "fr",
    "fra": "fr",
    "hi": "hi",
    "hin": "hi",
    "it": "it",
    "ita": "it",
    "ja": "ja",
    "jpn": "ja",
    # Kokoro's Portuguese is Brazilian: European Portuguese is read with its pronunciation.
    "pt": "pt-br",
    "por": "pt-br",
}
_BRITISH = frozenset({"gb", "uk", "ie", "au", "nz", "za"})  # English read with British phonemes


def kokoro_language(tag: str | None, english: str = "en-us") -> str | None:
    """An `xml:lang` tag ("es", "es-ES", "fr-FR", "pt-BR", "en-GB", "ja-JP", "hi-IN", "zh-CN"; any
    case, "-" or "_") as one of `LANGUAGES`; None for no tag. English without a region ("en") is
    `english` (the voice's accent). Raises ValueError for a language Kokoro does not speak."""
    if tag is None or not str(tag).strip():
        return None
    parts = str(tag).strip().lower().replace("_", "-").split("-")
    primary = parts[0]
    if primary in ("en", "eng"):
        regions = parts[1:]
        if not regions:
            return english if english in ENGLISH else "en-us"
        return "en-gb" if regions[0] in _BRITISH else "en-us"
    if primary in _PRIMARY:
        return _PRIMARY[primary]
    spoken = ", ".join(f"{NAMES[code]} ({code})" for code in LANGUAGES)
    raise ValueError(f"Kokoro does not speak the language {tag!r}; it speaks {spoken}.")


def voice_language(mix: tuple[tuple[str, float], ...], english: str = "en-us") -> str:
    """The language of a mix's heaviest voice (its id's first letter); English voices read with
    `english` (the mix's accent)."""
    if not mix:
        return english
    heaviest = max(mix, key=lambda vw: vw[1])[0]
    language = BY_PREFIX.get(heaviest[:1], "en-us")
    return english if language in ENGLISH else language
