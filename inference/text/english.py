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
"""

from __future__ import annotations

import re

from num2words import num2words

VERSION = "en/2"  # part of the model version (normalizer_version): change it when a rule changes

_NAME = r"(?:[A-Z][a-z]+|\d+(?:st|nd|rd|th))"
_STREET = re.compile(rf"\b({_NAME}) St\.")
_SAINT = re.compile(r"\bSt\.(?= [A-Z])")
_DRIVE = re.compile(rf"\b({_NAME}) Dr\.(?! [A-Z])")
CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
              "£": ("pound", "pounds", "penny", "pence")}  # fmt: skip
_MONEY = re.compile(r"([$€£])\s?(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})\b")
_TIME_AM_PM = re.compile(r"\b([AP])M\b")
_ENDS_WITH_AM_PM = re.compile(r"\b[ap]\.?m\.$", re.I)


def _amount(n: int, one: str, many: str) -> str:
    # Without num2words' "and" inside the number ("two hundred ninety-nine"): with it, "one thousand two
    # hundred and ninety-nine dollars and ninety-nine cents" was heard as "$1,200 and $99.99".
    words = num2words(n, lang="en").replace(",", "").replace(" and ", " ")
    return f"{words} {one if n == 1 else many}"


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
    return _MONEY.sub(_money, text)


def after(spelled: str, text: str) -> str:
    """The grammars' `spelled` out `text`, mended."""
    spelled = _TIME_AM_PM.sub(lambda m: f"{m.group(1)}.M.", spelled)
    if _ENDS_WITH_AM_PM.search(text.rstrip()) and not spelled.rstrip().endswith("."):
        spelled = spelled.rstrip() + "."
    return spelled
