"""Pronunciation lexicons: an organization's `text → alias` entries, applied to a request's text
before the worker spells out numbers and symbols (ElevenLabs calls them pronunciation dictionaries).

Matching rules (also in README.md):
- Whole words: an entry matches where it is not part of a longer word — `SQL` matches in "SQL,"
  and "(SQL)" but not in "MySQL"; `3M` matches in "3M's" but not in "13M". An entry written in
  Chinese or Japanese (which have no spaces between words) matches anywhere.
- Case: insensitive unless the entry says `case_sensitive` ("nginx" also matches "NGINX").
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

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
MAX_TEXT = 100
MAX_ALIAS = 200


@dataclass(frozen=True)
class Entry:
    text: str
    alias: str
    case_sensitive: bool = False

    def key(self) -> str:
        """Two entries with the same key are the same rule (the first one given is kept)."""
        return self.text if self.case_sensitive else self.text.casefold()


def _pattern(entry: Entry) -> str:
    body = re.escape(entry.text)
    if not entry.case_sensitive:
        body = f"(?i:{body})"
    left = r"(?<!\w)" if re.match(r"\w", entry.text[0]) and not CJK.match(entry.text[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", entry.text[-1]) and not CJK.match(entry.text[-1]) else ""
    return f"{left}{body}{right}"


def merged(lexicons: Iterable[Iterable[Entry]]) -> list[Entry]:
    """The entries of several lexicons in precedence order, one per text (the first wins)."""
    seen: dict[str, Entry] = {}
    for entries in lexicons:
        for entry in entries:
            seen.setdefault(entry.key(), entry)
    return list(seen.values())


def apply(text: str, entries: list[Entry]) -> str:
    """`text` with every whole-word occurrence of an entry replaced by its alias (module doc)."""
    if not entries or not text:
        return text
    ordered = sorted(entries, key=lambda e: len(e.text), reverse=True)
    pattern = re.compile("|".join(f"({_pattern(e)})" for e in ordered))

    def alias(match: re.Match) -> str:
        return ordered[match.lastindex - 1].alias if match.lastindex else match.group(0)

    return pattern.sub(alias, text)


def problem(text: object, alias: object) -> str | None:
    """Why an entry cannot be kept, or None."""
    if not isinstance(text, str) or not text.strip() or text != text.strip():
        return "text must be a non-empty string without leading or trailing spaces"
    if not isinstance(alias, str) or not alias.strip():
        return "alias must be a non-empty string"
    if len(text) > MAX_TEXT or len(alias) > MAX_ALIAS:
        return f"text is at most {MAX_TEXT} characters and alias at most {MAX_ALIAS}"
    if any(c in text + alias for c in "\n\r\t"):
        return "text and alias are one line each"
    return None
