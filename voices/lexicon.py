"""Pronunciation lexicons: an organization's `text → alias` entries, applied to a request's text
before the worker spells out numbers and symbols (ElevenLabs calls them pronunciation dictionaries).
An entry may give `phonemes` instead of, or beside, an alias: engines that read phonemes (Kokoro's
misaki, in its own notation) get `[text](/phonemes/)`; the others read the alias, and an entry with
phonemes only leaves their text as it is.

Matching rules (also in docs/voices.md, "Pronunciation lexicons"):
- Whole words: an entry matches where it is not part of a longer word — `SQL` matches in "SQL,",
  "(SQL)" and "我用SQL查询" but not in "MySQL"; `3M` matches in "3M's" but not in "13M"; `.NET`
  matches in "use .NET" but not in "ASP.NET". Chinese, Japanese and Korean characters are words of
  their own (those languages have no spaces), so an entry written in them matches anywhere.
- Case: insensitive unless the entry says `case_sensitive` ("nginx" also matches "NGINX").
- Runs of white space match any run of white space.
- Longest first, one pass: where entries overlap the longest wins ("New York City" before "New
  York"), and an alias is never matched again (no chains, no loops).
- Lexicons named in the request apply in the order given, then the organization's default ones;
  for the same text the first lexicon's entry wins.

This module is pure (no Django): `apply` takes the entries, the models keep them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")  # + Hangul, kana
MAX_TEXT = 100
MAX_ALIAS = 200
PHONEME_BREAKERS = "[]()/"  # characters that would break a `[text](/phonemes/)` link


@dataclass(frozen=True)
class Entry:
    text: str
    alias: str = ""
    case_sensitive: bool = False
    phonemes: str = ""

    def key(self) -> str:
        """Two entries with the same key are the same rule (the first one given is kept)."""
        return self.text if self.case_sensitive else self.text.casefold()


# The text as tokens: runs of word characters (letters, digits, "_"; "3M", "v2"), each CJK character
# on its own (those languages have no spaces), runs of white space, and any other character alone.
TOKEN = re.compile(rf"(?:(?!{CJK.pattern})\w)+|{CJK.pattern}|\s+|.", re.DOTALL)


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _key(tokens: list[str], fold: bool) -> tuple[str, ...]:
    """What two token runs must share to match: white space as one space; case folded unless not."""
    return tuple(" " if t.isspace() else (t.casefold() if fold else t) for t in tokens)


def _is_word(token: str) -> bool:
    return bool(re.match(r"\w", token)) and not CJK.match(token)


class Matcher:
    """Entries compiled for matching: a scan over the text's tokens that looks up runs of up to the
    longest entry's length in two dictionaries (case-sensitive entries, and the others case-folded),
    so the cost grows with the text, not with the number of entries."""

    def __init__(self, entries: list[Entry], phonemes: bool = False):
        self.phonemes = phonemes  # the engine reads phoneme links
        self.exact: dict[tuple[str, ...], Entry] = {}
        self.folded: dict[tuple[str, ...], Entry] = {}
        self.longest = 0
        for entry in entries:
            if not entry.alias and not (phonemes and entry.phonemes):
                continue  # phonemes only, for an engine that cannot read them: the text stays
            tokens = _tokens(entry.text)
            table = self.exact if entry.case_sensitive else self.folded
            table.setdefault(_key(tokens, not entry.case_sensitive), entry)
            self.longest = max(self.longest, len(tokens))

    def apply(self, text: str) -> str:
        if not self.longest or not text:
            return text
        tokens = _tokens(text)
        out: list[str] = []
        i = 0
        while i < len(tokens):
            matched = self._match(tokens, i)
            if matched is None:
                out.append(tokens[i])
                i += 1
            else:
                entry, n = matched
                if self.phonemes and entry.phonemes:
                    out.append(f"[{''.join(tokens[i : i + n])}](/{entry.phonemes}/)")
                else:
                    out.append(entry.alias)
                i += n
        return "".join(out)

    def _match(self, tokens: list[str], i: int) -> tuple[Entry, int] | None:
        for n in range(min(self.longest, len(tokens) - i), 0, -1):  # the longest entry first
            run = tokens[i : i + n]
            entry = self.exact.get(_key(run, False)) or self.folded.get(_key(run, True))
            if entry is None:
                continue
            # Whole words: an entry that begins or ends with a non-word character (".NET", "C++")
            # does not match against a word it would then be part of ("ASP.NET", "C++x").
            if not _is_word(run[0]) and i and _is_word(tokens[i - 1]):
                continue
            if not _is_word(run[-1]) and i + n < len(tokens) and _is_word(tokens[i + n]):
                continue
            return entry, n
        return None


def merged(lexicons: Iterable[Iterable[Entry]]) -> list[Entry]:
    """The entries of several lexicons in precedence order, one per text (the first wins)."""
    seen: dict[str, Entry] = {}
    for entries in lexicons:
        for entry in entries:
            seen.setdefault(entry.key(), entry)
    return list(seen.values())


def apply(text: str, entries: list[Entry], phonemes: bool = False) -> str:
    """`text` with every whole-word occurrence of an entry replaced by its alias, or by a phoneme
    link where the engine reads them (module doc)."""
    return Matcher(entries, phonemes).apply(text)


def problem(text: object, alias: object, phonemes: object = "") -> str | None:
    """Why an entry cannot be kept, or None."""
    if not isinstance(text, str) or not text.strip() or text != text.strip():
        return "text must be a non-empty string without leading or trailing spaces"
    if not isinstance(alias, str) or not isinstance(phonemes, str) or not (alias.strip() or phonemes.strip()):
        return "give an alias, phonemes, or both (non-empty strings)"
    if len(text) > MAX_TEXT or len(alias) > MAX_ALIAS or len(phonemes) > MAX_ALIAS:
        return f"text is at most {MAX_TEXT} characters, alias and phonemes at most {MAX_ALIAS}"
    if any(c in text + alias + phonemes for c in "\n\r\t"):
        return "text, alias and phonemes are one line each"
    if phonemes and (phonemes != phonemes.strip() or any(c in text + phonemes for c in PHONEME_BREAKERS)):
        return f"an entry with phonemes has none of {' '.join(PHONEME_BREAKERS)} in its text or phonemes"
    return None
