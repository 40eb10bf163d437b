"""Numbers, money, percentages, times and dates spelled out in Spanish, French, German and Japanese
(num2words), for a model that reads those languages (VoxCPM2); English and Chinese go through
WeTextProcessing's grammars (`inference.text.normalize`), as for every engine.

Which language a Latin-script text is in is told by its commonest words (`latin_language`): a
sentence of Spanish has "el", "que", "de"... A text with too few of them stays English. Japanese
is told by its kana. Pure Python: the web process may call it too.
"""

from __future__ import annotations

import importlib.metadata
import re

from num2words import num2words

RULES = "numbers/1"  # this module's rules: with num2words' version, part of a model's version (cache keys)


def version() -> str:
    return f"{RULES}-num2words-{importlib.metadata.version('num2words')}"


# The commonest short words of each language (none of them common in the others'), for telling
# apart the Latin-script languages whose numbers are spelled here.
_FUNCTION_WORDS = {
    "en": "the and is are of to in that it for with this you was be on not have".split(),
    "es": "el los las del que y en es una por con para como pero más muy está son mi".split(),
    "fr": "le les des et est une du pour dans que qui pas sur avec au ce sont je vous".split(),
    "de": "der die das und ist nicht ein eine zu mit den dem des ich sie wir auf für".split(),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")

CURRENCIES = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY", "円": "JPY"}
MONTHS = {
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
}
PERCENT = {"es": "por ciento", "fr": "pour cent", "de": "Prozent", "ja": "パーセント"}
# "5,50" is five and a half in these languages; "1.234" is a thousand and more (a period groups).
_DECIMAL_COMMA = ("es", "fr", "de")


def latin_language(text: str) -> str:
    """ "es", "fr" or "de" when the text's common words say so, else "en"."""
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return "en"
    scores = {lang: sum(w in vocab for w in words) for lang, vocab in _FUNCTION_WORDS.items()}
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    return best if scores[best] >= 1 and scores[best] > scores["en"] else "en"


def language_of(text: str) -> str:
    """The language whose numbers this module spells for `text`: "ja", "es", "fr", "de", or ""
    (English, Chinese or another: not this module's)."""
    if KANA.search(text):
        return "ja"
    lang = latin_language(text)
    return lang if lang != "en" else ""


def _number(raw: str, lang: str) -> float | int:
    """A written number as a value: "1.234,5" in Spanish is 1234.5; "1,234.5" in Japanese text."""
    if lang in _DECIMAL_COMMA:
        raw = raw.replace(".", "").replace("\u202f", "").replace(" ", "").replace(",", ".")
    else:
        raw = raw.replace(",", "")
    return float(raw) if "." in raw else int(raw)


def _words(value: float | int, lang: str, to: str = "cardinal", **kw) -> str:
    try:
        return num2words(value, lang=lang, to=to, **kw)
    except (NotImplementedError, OverflowError, TypeError, AttributeError):
        return num2words(value, lang=lang)  # a form num2words lacks for the language: the plain number


_NUM = r"\d+(?:[.,\u202f ]\d{3})*(?:[.,]\d+)?"
_MONEY_BEFORE = re.compile(rf"([€$£¥])\s?({_NUM})")
_MONEY_AFTER = re.compile(rf"({_NUM})\s?([€$£¥円])")
_PERCENT = re.compile(rf"({_NUM})\s?%")
_TIME = re.compile(r"\b([01]?\d|2[0-3])[:h]([0-5]\d)\b")
_DATE = re.compile(r"\b(0?[1-9]|[12]\d|3[01])[./](0?[1-9]|1[0-2])[./](\d{4})\b")
_ORDINAL = re.compile(r"\b(\d+)(º|ª|\.(?=\s+[A-ZÄÖÜ])|er\b|e\b)")
_PLAIN = re.compile(_NUM)


_NO_CENTS = re.compile(r",?\s+(?:con|et|und)\s+(?:cero|zéro|null)\s+\S+$")


def _money(amount: str, symbol: str, lang: str) -> str:
    value = float(_number(amount, lang))
    if lang == "ja":
        return _words(int(value) if value.is_integer() else value, lang) + ("円" if symbol in "¥円" else symbol)
    # A float: num2words reads an int as cents. Whole amounts lose its "and zero cents".
    return _NO_CENTS.sub("", _words(value, lang, to="currency", currency=CURRENCIES[symbol]))


def _date(day: str, month: str, year: str, lang: str) -> str:
    name, d, y = MONTHS[lang][int(month) - 1], int(day), _words(int(year), lang, to="year")
    if lang == "es":
        return f"{_words(d, lang)} de {name} de {y}"
    if lang == "fr":
        return f"{'premier' if d == 1 else _words(d, lang)} {name} {y}"
    return f"{_words(d, lang, to='ordinal')} {name} {y}"  # de: "zwölfte Mai" (the ordinal, as read)


def _time(hours: str, minutes: str, lang: str) -> str:
    h, m = int(hours), int(minutes)
    if lang == "es":
        return _words(h, lang) + (f" y {_words(m, lang)}" if m else " en punto")
    if lang == "fr":
        return f"{_words(h, lang)} heure{'s' if h > 1 else ''}" + (f" {_words(m, lang)}" if m else "")
    if lang == "de":
        return f"{_words(h, lang)} Uhr" + (f" {_words(m, lang)}" if m else "")
    return f"{_words(h, lang)}時" + (f"{_words(m, lang)}分" if m else "")  # ja


def spell_out(text: str, lang: str) -> str:
    """`text` with its numbers in words of `lang` ("es", "fr", "de" or "ja"): money, percentages,
    dates (day/month/year: European order), times, ordinals (1º, 1er, 1.), then the rest."""
    if lang in MONTHS:
        text = _DATE.sub(lambda m: _date(m[1], m[2], m[3], lang), text)
    text = _TIME.sub(lambda m: _time(m[1], m[2], lang), text)
    text = _MONEY_BEFORE.sub(lambda m: _money(m[2], m[1], lang), text)
    text = _MONEY_AFTER.sub(lambda m: _money(m[1], m[2], lang), text)
    space = "" if lang == "ja" else " "
    text = _PERCENT.sub(lambda m: f"{_words(_number(m[1], lang), lang)}{space}{PERCENT[lang]}", text)
    if lang != "ja":
        text = _ORDINAL.sub(lambda m: _words(int(m[1]), lang, to="ordinal"), text)
    text = _PLAIN.sub(lambda m: _words(_number(m[0], lang), lang), text)
    return re.sub(r"[ \t]+", " ", text).strip()
