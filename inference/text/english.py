"""English read right where WeTextProcessing's grammars read it wrong (heard by Whisper on Kokoro's
real weights, bench/intelligibility.py): rules applied before the grammars (`before`) and after
them (`after`), on English text only.

- "St." is "Saint" before a name ("St. Louis"), else "Street" after a name or a number ("Elm St.",
  "5th St."); the grammars left it, and the G2P read it "sənt." either way. "Dr." after a name
  and before no capital is "Drive" ("Elm Dr."); the grammars made every "Dr." "doctor".
- Money with cents ("$1,299.99") is said in dollars and cents, as people say it; the grammars said
  "one thousand two hundred and ninety nine point nine nine dollars".
- A time's "AM" (the grammars' "a.m.") becomes "A.M.", which the G2P spells out; "AM" it read as
  the word "am". The sentence's full stop the grammars swallowed after "a.m." is put back.
- A date written month first ("Jan. 1, 2000", "March 3rd, 1987", "12/24/2026") is read month first,
  as written ("January first, two thousand"); the grammars said "the first of january , two
  thousand" (and Whisper heard the order apart from the text).
- Grouped thousands without a currency ("1,200 windows") are read whole: the grammars dropped the
  "one" ("thousand two hundred windows"). Temperatures ("-5°C", "180°C") are "minus five degrees
  Celsius", "one hundred eighty degrees Celsius": the grammars said "negative" and "one hundred and
  eighty", heard as "100, and 80°C". Elsewhere the grammars' "hundred and" before a number is
  dropped where the text itself has no "hundred and" (American reading, as in money).
- "e.g.", "i.e." and "etc." are "for example", "that is" and "et cetera"; the grammars left them to
  the G2P, which spelled "e.g." as letters. A monarch's or pope's numeral is an ordinal ("Queen
  Elizabeth II": "Queen Elizabeth the second"), after a title and a name, or after a regnal name
  for numerals from II (so "World War II" stays the grammars' "World War two").
- Phone numbers are read digit by digit in their groups ("555-0100": "five five five, zero one zero
  zero"; "+44 20 7946 0958"): the grammars read "555-0100" as "five hundred fifty five negative oh one
  hundred" and an international number as cardinals. A local number is three digits (the first 2-9,
  as exchanges are) and four, with an area code, or near a word that says so ("call us at 555-0100"):
  "500-1000 people" and "pages 250-1000" stay ranges.
- A range of years ("1990-2000") is "nineteen ninety to two thousand"; the grammars read both as
  cardinals ("one thousand nine hundred ninety to two thousand").
- "hr", "hrs", "min(s)" and "sec(s)" after a number are hours, minutes, seconds (the grammars left
  "hrs" to the G2P, which said "ten H R S").
- A date written day first with a year ("5 May 2019") is "the fifth of May, twenty nineteen"; the
  grammars read "five May" (they do read "21 March": "May" alone is also a verb, so without a year it
  is a date only after "on", "from", "until", "by", "since", "before" or "after").
"""

from __future__ import annotations

import functools
import re

from num2words import num2words

VERSION = "en/5"  # part of the model version (normalizer_version): change it when a rule changes

_NAME = r"(?:[A-Z][a-z]+|\d+(?:st|nd|rd|th))"
_STREET = re.compile(rf"\b({_NAME}) St\.")
_SAINT = re.compile(r"\bSt\.(?= [A-Z])")
_DRIVE = re.compile(rf"\b({_NAME}) Dr\.(?! [A-Z])")
CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
              "£": ("pound", "pounds", "penny", "pence")}  # fmt: skip
_MONEY = re.compile(r"([$€£])\s?(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})\b")
_TIME_AM_PM = re.compile(r"\b([AP])M\b")
_ENDS_WITH_AM_PM = re.compile(r"\b[ap]\.?m\.$", re.I)


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
_ABBREVIATED = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_MONTH = rf"({'|'.join(MONTHS)}|(?:{'|'.join(_ABBREVIATED)})\.?)"
_DATE = re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?\b(?:,? (\d{{4}})\b)?")
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_GROUPED = re.compile(r"(?<![$€£\d,.])\b\d{1,3}(?:,\d{3})+\b(?![.,]\d)")
# A unit after a number ("1,500 km", "2,000 kg", "250 MB"): the grammars read number and unit
# together from plain digits ("one thousand five hundred kilometers"); spelled out, the unit was left.
_UNIT_AFTER = re.compile(r"\s?(?:[A-Za-z]{1,3}|mph|hrs|lbs|kWh|GHz|MHz|kHz|sq)\b")
_TEMPERATURE = re.compile(r"(?<![\w.])([-−]?)(\d+(?:\.\d+)?)\s?°\s?([CF])\b")
_TEXTS_OWN_AND = re.compile(r"\b(hundred|thousand|million|billion) and\b", re.I)
_HUNDRED_AND = re.compile(
    r"\b(hundred|thousand|million|billion) and (?=(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|"
    r"seventy|eighty|ninety)\b)"
)
_LATIN = [
    (re.compile(r"\be\.g\.", re.I), "for example"),
    (re.compile(r"\bi\.e\.", re.I), "that is"),
    (re.compile(r"\betc\.(?=\s*$)", re.I), "et cetera."),  # the abbreviation's stop ends the sentence too
    (re.compile(r"\betc\.", re.I), "et cetera"),
]
_ROMAN = r"(X{0,3}(?:IX|IV|V?I{0,3}))"
_TITLE = r"(?:King|Queen|Pope|Emperor|Empress|Prince|Princess|Tsar|Czar|Tsarina|Kaiser|Sultan|Pharaoh)"
_REGNAL_NAMES = (
    "Henry|Louis|Elizabeth|Edward|George|Charles|Richard|William|James|Mary|Victoria|Philip|Frederick|"
    "Napoleon|Peter|Catherine|Nicholas|Alexander|Pius|Leo|Gregory|Benedict|Innocent|Clement|Urban|Boniface|"
    "John Paul|Ramesses|Ptolemy|Wilhelm|Ludwig|Gustav|Carl|Juan Carlos|Felipe|Alfonso|Ferdinand|Constantine"
)
_TITLED = re.compile(rf"\b({_TITLE} [A-Z][a-z]+(?: [A-Z][a-z]+)?) {_ROMAN}\b")
_NAMED = re.compile(rf"\b({_REGNAL_NAMES}) {_ROMAN}\b")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10}
_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_LOCAL_PHONE = re.compile(r"(?<![\w.,/+$€£-])(1-)?(\d{3}-|\(\d{3}\) ?)?[2-9]\d{2}-\d{4}(?![\w-]|[.,]\d)")
# A bare "555-0100" is a phone number only near a word that says so ("500-1000 people" is a range).
_PHONE_CUE = re.compile(
    r"\b(?:call|calls|called|calling|phone|telephone|tel|dial|fax|text|number|mobile|cell|reach)\b\W*(?:\w+\W+){0,3}$",
    re.I,
)
_INTERNATIONAL_PHONE = re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(\d{1,4}\)\d{0,4}|[ .-]\d{1,4}){2,6}(?![\w-]|[.,]\d)")
_YEARS = re.compile(r"(?<![\w.,/-])((?:1[1-9]|20)\d\d)\s?[-–]\s?((?:1[1-9]|20)\d\d)(?![\w-]|[.,]\d)")
_TIME_UNITS = {"hr": ("hour", "hours"), "min": ("minute", "minutes"), "sec": ("second", "seconds")}
_TIME_UNIT = re.compile(r"\b(\d+(?:\.\d+)?)\s?(hr|min|sec)(s?)\b(\.(?=\s+[a-z]))?")
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? {_MONTH}(?:,? (\d{{4}})\b)?(?!\w)")
_DATE_WORDS = re.compile(r"\b(?:on|from|until|since|after|by|before) $", re.I)
_BETWEEN = re.compile(r"\bbetween\s+$", re.I)


def _roman(numeral: str) -> int:
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def _regnal(m: re.Match, least: int) -> str:
    n = _roman(m.group(2)) if m.group(2) else 0
    if n < least:
        return m.group(0)
    return f"{m.group(1)} the {num2words(n, lang='en', to='ordinal')}"


def _cardinal(n: float) -> str:
    return num2words(n, lang="en").replace(",", "").replace(" and ", " ")


def _year(year: int) -> str:
    return num2words(year, lang="en", to="year").replace(" and ", " ")


def _month_day(month: str, day: int, year: str | None) -> str:
    spoken = f"{month} {num2words(day, lang='en', to='ordinal')}"
    return f"{spoken}, {_year(int(year))}" if year else spoken


def _date(m: re.Match) -> str:
    day = int(m.group(2))
    if not 1 <= day <= 31:
        return m.group(0)
    month = m.group(1).rstrip(".")
    return _month_day(_ABBREVIATED.get(month, month), day, m.group(3))


def _numeric_date(m: re.Match) -> str:
    first, second = int(m.group(1)), int(m.group(2))
    if 1 <= first <= 12 and 1 <= second <= 31:  # month first, as the grammars and American English read it
        return _month_day(MONTHS[first - 1], second, m.group(3))
    if 1 <= second <= 12 and 1 <= first <= 31:  # 24/12/2026: only day first can be a date
        return _month_day(MONTHS[second - 1], first, m.group(3))
    return m.group(0)


def _before(m: re.Match, pattern: re.Pattern) -> bool:
    """Whether `pattern` (anchored at its end with `$`) matches the words just before `m`: some 80
    characters there from a word's start, not the whole text before it (each rule's look stays short
    on a long text; the patterns look at most a few words back)."""
    start = m.string.rfind(" ", 0, max(0, m.start() - 80)) + 1
    return pattern.search(m.string, start, m.start()) is not None


def _local_phone(m: re.Match) -> str:
    if m.group(1) or m.group(2) or _before(m, _PHONE_CUE):
        return _phone(m)
    return m.group(0)


def _phone(m: re.Match) -> str:
    groups = re.findall(r"\d+", m.group(0))
    spoken = ", ".join(" ".join(_DIGITS[int(d)] for d in group) for group in groups)
    return f"plus {spoken}" if m.group(0).startswith("+") else spoken


def _years(m: re.Match) -> str:
    first, last = int(m.group(1)), int(m.group(2))
    joined = "and" if _before(m, _BETWEEN) else "to"
    return f"{_year(first)} {joined} {_year(last)}" if first < last else m.group(0)


def _time_unit(m: re.Match) -> str:
    one, many = _TIME_UNITS[m.group(2)]
    return f"{m.group(1)} {one if m.group(1) == '1' else many}"


def _day_first(m: re.Match) -> str:
    day, month, year = int(m.group(1)), m.group(2).rstrip("."), m.group(3)
    said_as_date = year or _before(m, _DATE_WORDS)
    if not 1 <= day <= 31 or not said_as_date:
        return m.group(0)
    spoken = f"the {num2words(day, lang='en', to='ordinal')} of {_ABBREVIATED.get(month, month)}"
    return f"{spoken}, {_year(int(year))}" if year else spoken


def _grouped(m: re.Match) -> str:
    digits = m.group(0).replace(",", "")
    if _UNIT_AFTER.match(m.string, m.end()):
        return digits  # the grammars read it with its unit
    return _cardinal(int(digits))


def _said(spoken: str, m: re.Match) -> str:
    return spoken.capitalize() if m.group(0)[0].isupper() else spoken


def _temperature(m: re.Match) -> str:
    value = float(m.group(2)) if "." in m.group(2) else int(m.group(2))
    sign = "minus " if m.group(1) else ""
    return f"{sign}{_cardinal(value)} degrees {'Celsius' if m.group(3) == 'C' else 'Fahrenheit'}"


def _amount(n: int, one: str, many: str) -> str:
    # Without num2words' "and" inside the number ("two hundred ninety-nine"): with it, "one thousand two
    # hundred and ninety-nine dollars and ninety-nine cents" was heard as "$1,200 and $99.99".
    return f"{_cardinal(n)} {one if n == 1 else many}"


def _money(m: re.Match) -> str:
    one, many, cent, cents = CURRENCIES[m.group(1)]
    whole, part = int(m.group(2).replace(",", "")), int(m.group(3))
    if not part:
        return _amount(whole, one, many)
    return f"{_amount(whole, one, many)} and {_amount(part, cent, cents)}"


def before(text: str) -> str:
    """`text` with what the grammars misread written out."""
    text = _SAINT.sub("Saint", text)  # first: "Visit St. Paul's" is a saint, though a capital precedes
    text = _STREET.sub(r"\1 Street", text)
    text = _DRIVE.sub(r"\1 Drive", text)
    text = _MONEY.sub(_money, text)
    text = _INTERNATIONAL_PHONE.sub(_phone, text)
    text = _LOCAL_PHONE.sub(_local_phone, text)
    text = _YEARS.sub(_years, text)
    text = _TIME_UNIT.sub(_time_unit, text)
    text = _DAY_FIRST.sub(_day_first, text)
    text = _DATE.sub(_date, text)
    text = _NUMERIC_DATE.sub(_numeric_date, text)
    text = _TEMPERATURE.sub(_temperature, text)
    text = _GROUPED.sub(_grouped, text)
    for pattern, spoken in _LATIN:
        text = pattern.sub(functools.partial(_said, spoken), text)
    text = _TITLED.sub(lambda m: _regnal(m, 1), text)
    return _NAMED.sub(lambda m: _regnal(m, 2), text)


def after(spelled: str, text: str) -> str:
    """The grammars' `spelled` out `text`, mended."""
    spelled = _TIME_AM_PM.sub(lambda m: f"{m.group(1)}.M.", spelled)
    if not _TEXTS_OWN_AND.search(text):  # the grammars' "and", not the text's
        spelled = _HUNDRED_AND.sub(r"\1 ", spelled)
    if _ENDS_WITH_AM_PM.search(text.rstrip()) and not spelled.rstrip().endswith("."):
        spelled = spelled.rstrip() + "."
    return spelled
