"""Numbers, money, percentages, times and dates spelled out in Spanish, French, German, Italian,
Brazilian Portuguese and Japanese (num2words), for models that read those languages (VoxCPM2 tells
the language from the text, `reading`; Kokoro from the row's voice or `lang`); English and Chinese go
through WeTextProcessing's grammars (`inference.text.preparation.normalize`), as for every engine.

Which language a Latin-script text is in is told by its commonest words (`latin_language`): a
sentence of Spanish has "el", "que", "de"...; Japanese is told by its kana (`reading`). Where the
language is unclear, or one whose numbers are not spelled here, the digits stay as written (the
model reads them); a number num2words cannot say stays too. Pure Python: the web may call it.
"""

from __future__ import annotations

import importlib.metadata
import re

from num2words import num2words

RULES = "numbers/2"  # this module's rules: with num2words' version, part of a model's version (cache keys)


def version() -> str:
    return f"{RULES}-num2words-{importlib.metadata.version('num2words')}"


# The commonest short words of each language, for telling apart the Latin-script languages whose
# numbers are spelled here (es, fr, de) from English (WeTextProcessing's grammars) and from the
# others VoxCPM2 speaks, whose digits are left to the model.
_FUNCTION_WORDS = {
    "en": "the and is are of to in that it for with this you was be on not have".split(),
    "es": "el los las del que y en es una por con para como pero más muy está son mi".split(),
    "fr": "le les des et est une du pour dans que qui pas sur avec au ce sont je vous".split(),
    "de": "der die das und ist nicht ein eine zu mit den dem des ich sie wir auf für".split(),
    "pt": "não você muito uma com os as do da dos das ao em é eu ele ela isso que para".split(),
    "it": "il di che non sono per una della nel gli questo anche ho è".split(),
    "nl": "het een van en de ik niet dat zijn met op voor".split(),
    "nordic": "og ikke jeg det er på med av har som och inte är att".split(),
    "pl": "nie się jest na że to jak ale mam".split(),
    "ms": "dan yang di ini itu tidak dengan untuk saya ada".split(),
    "tr": "ve bir bu için ile değil çok ben".split(),
    "vi": "và của là có không một những tôi".split(),
    "fi": "ja on ei että se hän mutta minä".split(),
    "tl": "ang ng mga sa ay at hindi ako".split(),
    "sw": "na ya wa kwa ni si mimi hii".split(),
}
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
KANA = re.compile(r"[\u3040-\u309f\u30a0-\u30fa\u31f0-\u31ff]")  # not ・ or ー, which Chinese uses too
HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")

CURRENCIES = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY", "円": "JPY"}
MONTHS = {
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split(),
}
PERCENT = {
    "es": "por ciento",
    "fr": "pour cent",
    "de": "Prozent",
    "it": "per cento",
    "pt": "por cento",
    "ja": "パーセント",
}
# "5,50" is five and a half in these languages; "1.234" is a thousand and more (a period groups).
_DECIMAL_COMMA = ("es", "fr", "de", "it", "pt")
# The languages spell_out takes; "pt" is Brazilian Portuguese (num2words' pt_BR).
LANGUAGES = ("es", "fr", "de", "it", "pt", "ja")
_NUM2WORDS = {"pt": "pt_BR"}
# The languages `reading` tells from a Latin-script text's words (VoxCPM2's: what it has always read).
_TOLD_FROM_TEXT = ("es", "fr", "de")


def latin_language(text: str) -> str:
    """The language of a Latin-script text by its common words: "en" when it has none (a short
    text), the one with the most when that one is clear, "" when two tie (unsure)."""
    words = [w.lower() for w in _WORD.findall(text)]
    scores = {lang: sum(w in vocab for w in words) for lang, vocab in _FUNCTION_WORDS.items()}
    best = max(scores.values(), default=0)
    if best == 0:
        return "en"
    leaders = [lang for lang, score in scores.items() if score == best]
    return leaders[0] if len(leaders) == 1 else ""


def reading(text: str) -> str:
    """Who spells out `text`'s numbers: "ja", "es", "fr" or "de" (this module), "grammars" (English
    and Chinese: WeTextProcessing, as for every engine), or "" (another language: its digits are
    left to the model, which reads them itself)."""
    if KANA.search(text):
        return "ja"
    if HAN.search(text):
        return "grammars"
    letters = _WORD.findall(text)
    if any(not LATIN.match(ch) for word in letters for ch in word):
        return ""  # Cyrillic, Arabic, Hangul, Thai...
    lang = latin_language(text)
    if lang == "en":
        return "grammars"
    return lang if lang in _TOLD_FROM_TEXT else ""


def _number(raw: str, lang: str) -> float | int:
    """A written number as a value: "1.234,5" in Spanish is 1234.5 (a period followed by three
    digits groups; "2.5" is two and a half), "1,234.5" elsewhere."""
    raw = re.sub(r"[\u202f ]", "", raw)
    group, point = (".", ",") if lang in _DECIMAL_COMMA else (",", ".")
    if re.fullmatch(rf"\d{{1,3}}(?:\{group}\d{{3}})+(?:\{point}\d+)?", raw):
        raw = raw.replace(group, "")
    elif re.fullmatch(r"\d{1,3}(?:,\d{3}){2,}", raw):  # 1,000,000 in any language
        raw = raw.replace(",", "")
    raw = raw.replace(",", ".")
    return float(raw) if "." in raw else int(raw)


def _words(value: float | int, lang: str, to: str = "cardinal", **kw) -> str:
    lang = _NUM2WORDS.get(lang, lang)
    try:
        return num2words(value, lang=lang, to=to, **kw)
    except (NotImplementedError, OverflowError, TypeError, AttributeError):
        return num2words(value, lang=lang)  # a form num2words lacks for the language: the plain number


def _safely(spell):
    """A substitution that leaves the text as written where num2words cannot say it (a number too
    large, a form it lacks): the model then reads the digits itself."""

    def sub(match: re.Match) -> str:
        try:
            return spell(match)
        except Exception:
            return match[0]

    return sub


_NUM = r"\d+(?:[.,\u202f ]\d{3})*(?:[.,]\d+)?"
_MONEY_BEFORE = re.compile(rf"(R\$|[€$£¥])\s?({_NUM})")
_MONEY_AFTER = re.compile(rf"({_NUM})\s?([€$£¥円])")
_PERCENT = re.compile(rf"({_NUM})\s?%")
_FRENCH_HOUR = re.compile(r"(?<!\d)([01]?\d|2[0-3])h(?![\w])")  # "14h": the hour alone
_TIME = re.compile(r"(?<!\d)([01]?\d|2[0-3])[:h]([0-5]\d)(?!\d)")
_DATE = re.compile(r"\b(0?[1-9]|[12]\d|3[01])[./](0?[1-9]|1[0-2])[./](\d{4})\b")
_ORDINALS = {  # 1º (es), 1er / 2e (fr), 3. Mai (de: before a month)
    "es": re.compile(r"\b(\d+)[ºª]"),
    "it": re.compile(r"\b(\d+)[ºª°]"),
    "pt": re.compile(r"\b(\d+)[ºª°]"),
    "fr": re.compile(r"\b(\d+)(?:er|re|e|ème)\b"),
    "de": re.compile(r"\b(\d+)\.(?=\s+(?:" + "|".join(MONTHS["de"]) + r")\b)"),
}
_PLAIN = re.compile(_NUM)


_NO_CENTS = re.compile(r",?\s+(?:con|et|und|e)\s+(?:cero|zéro|null|zero)\s+\S+$")


def _money(amount: str, symbol: str, lang: str) -> str:
    value = float(_number(amount, lang))
    if lang == "ja":
        return _words(int(value) if value.is_integer() else value, lang) + ("円" if symbol in "¥円" else symbol)
    if lang == "pt":
        return _real(value, symbol)
    # A float: num2words reads an int as cents. Whole amounts lose its "and zero cents".
    return _NO_CENTS.sub("", _words(value, lang, to="currency", currency=CURRENCIES[symbol]))


def _real(value: float, symbol: str) -> str:
    """Money in Brazilian Portuguese: reais (R$) by pt_BR's own form, other currencies by
    Portuguese's, with Brazil's word for cents."""
    if symbol == "R$":
        words = num2words(value, lang="pt_BR", to="currency")
    else:
        words = num2words(value, lang="pt", to="currency", currency=CURRENCIES[symbol])
    return _NO_CENTS.sub("", words).replace("cêntimos", "centavos").replace("cêntimo", "centavo")


def _date(day: str, month: str, year: str, lang: str) -> str:
    name, d, y = MONTHS[lang][int(month) - 1], int(day), _words(int(year), lang, to="year")
    if lang == "es":
        return f"{_words(d, lang)} de {name} de {y}"
    if lang == "fr":
        return f"{'premier' if d == 1 else _words(d, lang)} {name} {y}"
    if lang == "it":
        return f"{'primo' if d == 1 else _words(d, lang)} {name} {y}"
    if lang == "pt":
        return f"{'primeiro' if d == 1 else _words(d, lang)} de {name} de {y}"
    return f"{_words(d, lang, to='ordinal')} {name} {y}"  # de: "zwölfte Mai" (the ordinal, as read)


def _time(hours: str, minutes: str, lang: str) -> str:
    h, m = int(hours), int(minutes)
    if lang == "es":
        return ("una" if h == 1 else _words(h, lang)) + (f" y {_words(m, lang)}" if m else " en punto")
    if lang == "fr":
        hours = "une heure" if h == 1 else f"{_words(h, lang)} heures"
        return hours + (f" {_words(m, lang)}" if m else "")
    if lang == "de":
        return f"{_words(h, lang)} Uhr" + (f" {_words(m, lang)}" if m else "")
    if lang == "it":
        return ("l'una" if h == 1 else _words(h, lang)) + (f" e {_words(m, lang)}" if m else "")
    if lang == "pt":
        hours = {1: "uma", 2: "duas"}.get(h, _words(h, lang))  # hora is feminine
        return hours + (f" e {_words(m, lang)}" if m else (" hora" if h == 1 else " horas"))
    return f"{_words(h, lang)}時" + (f"{_words(m, lang)}分" if m else "")  # ja


def _plain(raw: str, lang: str) -> str:
    words = _words(_number(raw, lang), lang)
    if lang == "pt" and words.startswith("mil, "):  # pt_BR's "mil, duzentos": no pause after "mil"
        words = "mil " + words[5:]
    if lang == "es" and "," in raw and " punto " in words:  # "1,5": Spanish says "coma" for its comma
        words = words.replace(" punto ", " coma ")
    return words


def spell_out(text: str, lang: str) -> str:
    """`text` with its numbers in words of `lang` (one of LANGUAGES): money, percentages,
    dates (day/month/year: European order), times, ordinals (1º, 1er, 1.), then the rest."""
    if lang in MONTHS:
        text = _DATE.sub(_safely(lambda m: _date(m[1], m[2], m[3], lang)), text)
    text = _TIME.sub(_safely(lambda m: _time(m[1], m[2], lang)), text)
    if lang == "fr":
        text = _FRENCH_HOUR.sub(_safely(lambda m: _time(m[1], "00", lang)), text)
    text = _MONEY_BEFORE.sub(_safely(lambda m: _money(m[2], m[1], lang)), text)
    text = _MONEY_AFTER.sub(_safely(lambda m: _money(m[1], m[2], lang)), text)
    space = "" if lang == "ja" else " "
    text = _PERCENT.sub(_safely(lambda m: f"{_words(_number(m[1], lang), lang)}{space}{PERCENT[lang]}"), text)
    if lang in _ORDINALS:
        text = _ORDINALS[lang].sub(_safely(lambda m: _words(int(m[1]), lang, to="ordinal")), text)
    text = _PLAIN.sub(_safely(lambda m: _plain(m[0], lang)), text)
    return re.sub(r"[ \t]+", " ", text).strip()
