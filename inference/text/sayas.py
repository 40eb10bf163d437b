"""SSML's `say-as`: a number, date, time, amount, phone number or string said as the request asks.

Each `interpret-as` becomes words in the run's language with num2words where it speaks that
language (English, Spanish, French, German, Italian, Portuguese, Japanese and more), so that the
model reads exactly what was asked ("2026" as a year, "555-0100" digit by digit); where num2words
does not (Chinese, Hindi), the digits are written the way the shared text preparation spells out
(`inference.text.preparation.normalize` in the worker: "2026年12月3日"). `SayAsError` says what is wrong with
the content, for the SSML parser to place it. Pure Python: the web process calls it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from num2words import CONVERTER_CLASSES, num2words

KINDS = ("characters", "spell-out", "cardinal", "number", "ordinal", "digits", "telephone", "date", "time", "currency")
DATE_FORMATS = ("mdy", "dmy", "ymd", "md", "dm", "ym", "my", "y", "m", "d")

MONTHS = {
    "en": "January February March April May June July August September October November December".split(),
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre".split(),
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre".split(),
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre".split(),
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro".split(),
}
PLUS = {"en": "plus", "es": "más", "fr": "plus", "de": "plus", "it": "più", "pt": "mais", "ja": "プラス", "zh": "加"}
CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
ZH_DIGITS = "〇一二三四五六七八九"


class SayAsError(ValueError):
    """The content cannot be said as asked; the message names it."""


# What num2words raises for a value or a form one of its languages cannot say.
_NUM2WORDS_ERRORS = (NotImplementedError, KeyError, ValueError, TypeError, AttributeError, OverflowError, IndexError)


def _n2w_lang(lang: str) -> str | None:
    """num2words' name for the language (`pt-br` → `pt_BR`), or None where it has none."""
    lang = lang.lower()
    if lang in ("pt-br", "pt_br"):
        return "pt_BR"
    base = lang.split("-")[0]
    return base if base in CONVERTER_CLASSES else None


def _number(text: str, kind: str) -> Decimal:
    cleaned = text.strip().replace(",", "").replace("\u00a0", "").replace(" ", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise SayAsError(f"'{text.strip()}' is not a number ({kind} reads one, e.g. 1234 or -3.5).") from None
    if not value.is_finite() or abs(value) >= Decimal(10) ** 15:
        raise SayAsError(f"'{text.strip()}' is out of range for {kind} (at most 15 digits).")
    return value


def _spell(value: int | Decimal, lang: str, **kwargs) -> str:
    code = _n2w_lang(lang)
    if code is None:
        return str(value)  # the worker's grammars spell it out (Chinese), or the model reads it
    return num2words(value, lang=code, **kwargs)


def _digit_words(digits: str, lang: str) -> str:
    code = _n2w_lang(lang)
    if code is None:
        return "".join(ZH_DIGITS[int(d)] for d in digits) if lang.startswith("zh") else " ".join(digits)
    return " ".join(num2words(int(d), lang=code) for d in digits)


def characters(text: str) -> str:
    """Each letter and digit on its own: "ABC-12" → "A B C 1 2" (the model names letters; digits
    are spelled out with the rest of the text)."""
    return " ".join(ch for ch in text if not ch.isspace() and ch not in "-_.")


def ordinal(text: str, lang: str) -> str:
    stripped = re.sub(r"(?i)(st|nd|rd|th|º|ª|e|er|ème|°)$", "", text.strip())
    value = _number(stripped, "ordinal")
    if value != int(value) or value < 0:
        raise SayAsError(f"'{text.strip()}' is not a whole number (ordinal reads 1, 2nd, 23rd...).")
    if lang.startswith("zh"):
        return f"第{int(value)}"
    return _spell(int(value), lang, to="ordinal")


def telephone(text: str, lang: str) -> str:
    """Digit by digit, a short pause (a comma) between the groups as written: "+1 (555) 010-0199"
    → "plus one, five five five, zero one zero, ..."."""
    groups = re.findall(r"\+|\d+", text)
    if not any(g.isdigit() for g in groups) or re.search(r"[^\d\s()+.\-/]", text):
        raise SayAsError(f"'{text.strip()}' is not a telephone number (digits, spaces, + ( ) - . / only).")
    words = [PLUS.get(lang.split("-")[0], "plus") if g == "+" else _digit_words(g, lang) for g in groups]
    out = []
    for i, w in enumerate(words):
        out.append(w if i == 0 or groups[i - 1] == "+" else f", {w}")
    return " ".join(out).replace(" , ", ", ")


def date(text: str, fmt: str, lang: str) -> str:
    fmt = fmt or ("ymd" if re.fullmatch(r"\s*\d{4}-\d{1,2}-\d{1,2}\s*", text) else "mdy")
    if fmt not in DATE_FORMATS:
        raise SayAsError(f"Date format '{fmt}' is not one of {', '.join(DATE_FORMATS)}.")
    parts = re.findall(r"\d+", text)
    if len(parts) == 1 and len(parts[0]) == len(fmt) * 2 + (2 if "y" in fmt else 0):  # 20261203
        sizes = [4 if c == "y" else 2 for c in fmt]
        at = 0
        parts = []
        for size in sizes:
            parts.append(text.strip()[at : at + size])
            at += size
    if len(parts) != len(fmt) or re.search(r"[^\d\s/.\-]", text):
        raise SayAsError(f"'{text.strip()}' is not a date in the format '{fmt}' (e.g. 12/03/2026 for mdy).")
    if any(len(p) > (4 if c == "y" else 2) for c, p in zip(fmt, parts, strict=True)):
        raise SayAsError(f"'{text.strip()}' is not a date in the format '{fmt}' (years of up to 4 digits).")
    fields = {c: int(p) for c, p in zip(fmt, parts, strict=True)}
    if not 1 <= fields.get("m", 1) <= 12 or not 1 <= fields.get("d", 1) <= 31:
        raise SayAsError(f"'{text.strip()}' has no such month or day (format '{fmt}').")
    return _date_words(fields, lang)


def _date_words(fields: dict[str, int], lang: str) -> str:
    base = lang.split("-")[0]
    y, m, d = fields.get("y"), fields.get("m"), fields.get("d")
    if base in ("zh", "ja"):
        return "".join(f"{v}{unit}" for v, unit in ((y, "年"), (m, "月"), (d, "日")) if v is not None)
    months = MONTHS.get(base)
    if months is None:  # a language whose month names are not written here: the digits, in order
        return "/".join(str(v) for v in (d, m, y) if v is not None)
    month = months[m - 1] if m else ""
    year = _spell(y, lang, to="year") if y is not None else ""
    if base == "en":
        day = _spell(d, lang, to="ordinal") if d else ""
        head = " ".join(x for x in (month, day) if x)
        return f"{head}, {year}" if head and year else head or year
    day = ""
    if d:
        day = _spell(d, lang, to="ordinal") if d == 1 and base == "fr" else _spell(d, lang)
    joint = {"es": " de ", "pt": " de "}.get(base, " ")
    return joint.join(x for x in (day, month, year) if x)


def time_of_day(text: str, lang: str) -> str:
    match = re.fullmatch(r"\s*(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([aApP]\.?\s?[mM]\.?)?\s*", text)
    if not match:
        raise SayAsError(f"'{text.strip()}' is not a time (e.g. 14:30, 2:30pm).")
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    if hour > 23 or minute > 59 or (match.group(4) and not 1 <= hour <= 12):
        raise SayAsError(f"'{text.strip()}' is not a time of day.")
    if _n2w_lang(lang) is None:
        return f"{hour}:{minute:02d}" if lang.startswith(("zh", "ja")) else text.strip()
    words = _spell(hour, lang)
    if minute:
        words += (" oh " if lang.startswith("en") and minute < 10 else " ") + _spell(minute, lang)
    elif lang.startswith("en") and not match.group(4):
        words += " hundred" if hour >= 13 or hour == 0 else " o'clock"
    if match.group(4):
        words += " a m" if match.group(4).strip().lower().startswith("a") else " p m"
    return words


def currency(text: str, lang: str) -> str:
    raw = text.strip()
    code = next((c for s, c in CURRENCY_SYMBOLS.items() if s in raw), None)
    letters = re.findall(r"\b[A-Z]{3}\b", raw)
    if letters:
        code = letters[0]
    numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", raw)
    amount = numbers[0] if len(numbers) == 1 else ""
    if code is None or not amount or re.search(r"\d[eE]", raw):
        raise SayAsError(f"'{raw}' is not an amount with its currency (e.g. $12.50, 12.50 EUR).")
    value = _number(amount, "currency")
    n2w = _n2w_lang(lang)
    if n2w is None:
        return raw  # the worker's grammars read "12.5元" / "$12.50"
    try:
        return num2words(value, lang=n2w, to="currency", currency=code)
    except _NUM2WORDS_ERRORS:  # a currency num2words does not name in that language: the number, then the code
        return f"{num2words(value, lang=n2w)} {code}"


def say_as(text: str, kind: str, fmt: str, lang: str) -> str:
    """`text` as words for `kind` (one of KINDS) in `lang` (a BCP 47 tag, "en" when unknown);
    SayAsError when it cannot be said so (never another exception: the request gets a 400)."""
    try:
        words = _say_as(text, kind, fmt, (lang or "en").lower())
    except SayAsError:
        raise
    except _NUM2WORDS_ERRORS:
        raise SayAsError(f"'{text.strip()}' cannot be said as {kind} in '{lang}'.") from None
    if not any(ch.isalnum() for ch in words):
        raise SayAsError(f"'{text.strip()}' has nothing to say as {kind}.")
    return words


def _say_as(text: str, kind: str, fmt: str, lang: str) -> str:
    if kind in ("characters", "spell-out"):
        return characters(text)
    if kind in ("cardinal", "number"):
        value = _number(text, kind)
        return _spell(int(value) if value == int(value) else value, lang)
    if kind == "ordinal":
        return ordinal(text, lang)
    if kind == "digits":
        digits = re.sub(r"\s", "", text)
        if not digits.isdigit():
            raise SayAsError(f"'{text.strip()}' is not a string of digits.")
        return _digit_words(digits, lang)
    if kind == "telephone":
        return telephone(text, lang)
    if kind == "date":
        return date(text, fmt, lang)
    if kind == "time":
        return time_of_day(text, lang)
    return currency(text, lang)
