"""Which languages a text is written in, told apart by script, and the refusal of text in
languages a model does not speak (no model: every engine's text preparation uses it)."""

from __future__ import annotations

import re

# Scripts by the language they are written in: what `languages` tells apart (Latin is English here,
# Cyrillic Russian unless it has Ukrainian's own letters: what tells the engines' languages apart,
# and the scripts of languages none of them speaks, so that such text is refused, not read as noise).
LANGUAGE_NAMES = {
    "uk": "Ukrainian",
    "lo": "Lao",
    "km": "Khmer",
    "my": "Burmese",
    "ka": "Georgian",
    "hy": "Armenian",
    "am": "Amharic",
    "bn": "Bengali",
    "pa": "Punjabi",
    "gu": "Gujarati",
    "ta": "Tamil",
    "te": "Telugu",
    "kn": "Kannada",
    "ml": "Malayalam",
    "si": "Sinhala",
    "bo": "Tibetan",
    "en": "English",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "ru": "Russian",
    "ar": "Arabic",
    "el": "Greek",
    "he": "Hebrew",
    "th": "Thai",
    "hi": "Hindi",
}
_SCRIPTS = (
    ("ja", re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")),  # kana (kanji alone read as Chinese)
    ("ko", re.compile(r"[\u1100-\u11ff\uac00-\ud7af\u3130-\u318f]")),
    ("uk", re.compile(r"[\u0404\u0406\u0407\u0454\u0456\u0457\u0490\u0491]")),  # Є І Ї є і ї Ґ ґ
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("lo", re.compile(r"[\u0e80-\u0eff]")),
    ("km", re.compile(r"[\u1780-\u17ff]")),
    ("my", re.compile(r"[\u1000-\u109f]")),
    ("ka", re.compile(r"[\u10a0-\u10ff]")),
    ("hy", re.compile(r"[\u0530-\u058f]")),
    ("am", re.compile(r"[\u1200-\u137f]")),
    ("bn", re.compile(r"[\u0980-\u09ff]")),
    ("pa", re.compile(r"[\u0a00-\u0a7f]")),
    ("gu", re.compile(r"[\u0a80-\u0aff]")),
    ("ta", re.compile(r"[\u0b80-\u0bff]")),
    ("te", re.compile(r"[\u0c00-\u0c7f]")),
    ("kn", re.compile(r"[\u0c80-\u0cff]")),
    ("ml", re.compile(r"[\u0d00-\u0d7f]")),
    ("si", re.compile(r"[\u0d80-\u0dff]")),
    ("bo", re.compile(r"[\u0f00-\u0fff]")),
    ("ar", re.compile(r"[\u0600-\u06ff\u0750-\u077f]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("zh", re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")),
    ("en", re.compile(r"[A-Za-z\u00c0-\u024f]")),
)


def written_in(plain: str) -> set[str]:
    """The languages `plain` (text without tags) is written in, by script."""
    found = {lang for lang, script in _SCRIPTS if script.search(plain)}
    if "uk" in found:
        found.discard("ru")  # Ukrainian's letters: the Cyrillic is Ukrainian
    return found


def refusal(found: set[str], spoken: tuple[str, ...], model: str) -> str | None:
    """Why a model cannot read text written in the languages `found`, or None."""
    other = sorted(found - set(spoken))
    if not other:
        return None
    names = ", ".join(LANGUAGE_NAMES.get(x, x) for x in other)
    if len(spoken) > 2:
        can = f"{len(spoken)} languages ({', '.join(spoken)})"
    else:
        can = " and ".join(LANGUAGE_NAMES.get(x, x) for x in spoken) + " (or both mixed)"
    return f"Model '{model}' speaks {can}; the input has {names}."
