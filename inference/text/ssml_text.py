"""An SSML document (`inference.text.ssml`) cut into segments, each with how it is said (`SegmentStyle`).

A span said another way (voice, rate, volume, pitch, language), a `break`, a `p` or an `s` starts
a segment of its own; within a span, sentences are cut as for plain text (`segment_text`). A
segment's style carries the silence before it (a break's time, else the usual pause between
sentences, none inside a sentence) and its marks, by where they fall in its text. Between
`prepare_ssml` (memoised, no tenant data) and the worker, `finish` applies the organization's
lexicons outside the spans that say-as, sub and phoneme fixed (they win) and takes the marks out
of the text: until then a mark is a private-use character in the text (`MARK`) and a fixed span is
held between OPEN and CLOSE.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .preparation import (
    PHONEME_LINK,
    PreparedText,
    Segmenting,
    refuse_other_languages,
    refuse_unknown_tags,
    segment_text,
)
from .ssml import PARAGRAPH_PAUSE_MS, PRIVATE, Document, Edge, Mark, Pause, SsmlError, Style, Words, parse

MARK = 0xF0000  # mark n is chr(MARK + n) in the text until `finish`
FIXED = 0x100000  # fixed span n is chr(FIXED + n) while sentences are cut
OPEN, CLOSE = "\U0010fffe", "\U0010fffd"  # a fixed span in a segment until `finish`
SILENT_DB = -120.0  # volume "silent" (kept as a number: JSON has no -inf)
MAX_GAIN_DB = 20.0  # nested prosody and emphasis add up: no louder than this
_SENTENCE_DONE = re.compile(r"[.!?。！？；;…]\s*$")
_LEADING_PUNCTUATION = re.compile(r"^([.!?,;:。！？，；：…]+)\s*")


@dataclass(frozen=True)
class SegmentStyle:
    """How one segment is said, beyond the request's own settings."""

    pause_ms: int | None = None  # silence before it; None: the usual (between sentences, none inside one)
    after_ms: int = 0  # silence after it (a break at the end of the input)
    voice: str = ""  # another voice of the model ("": the request's)
    rate: float = 1.0  # times the request's speed
    volume_db: float = 0.0
    pitch: float = 0.0  # semitones
    lang: str = ""  # a language for the span (xml:lang), "" the text's own
    # (name, offset in the segment's text, ms): at offset 0, ms before the words (in the pause before
    # them); offset -1: ms into `after_ms`, the pause after the last segment.
    marks: tuple[tuple[str, int, int], ...] = ()

    def as_dict(self) -> dict:
        """Only what differs from the defaults (what a job keeps per segment)."""
        out: dict = {}
        for name, default in (
            ("pause_ms", None),
            ("after_ms", 0),
            ("voice", ""),
            ("rate", 1.0),
            ("volume_db", 0.0),
            ("pitch", 0.0),
            ("lang", ""),
        ):
            value = getattr(self, name)
            if value != default:
                out[name] = round(value, 4) if isinstance(value, float) else value
        if self.marks:
            out["marks"] = [list(m) for m in self.marks]
        return out

    @classmethod
    def from_dict(cls, value: dict) -> SegmentStyle:
        fields = {k: v for k, v in value.items() if k in cls.__dataclass_fields__ and k != "marks"}
        marks = tuple((str(m[0]), int(m[1]), int(m[2]) if len(m) > 2 else 0) for m in value.get("marks", ()))
        return cls(**fields, marks=marks)


@dataclass
class _Block:
    style: Style
    pause_ms: int | None
    continues: bool  # it goes on with the sentence before
    text: list[str] = field(default_factory=list)  # with FIXED and MARK characters


class _Marks:
    """Marks by index: names, and how far (ms) each lies from its segment's text: before its start
    (a mark in the pause before the words) or into the pause after the last segment."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ms: list[int] = []

    def add(self, name: str) -> str:
        self.names.append(name)
        self.ms.append(0)
        return chr(MARK + len(self.names) - 1)


def _blocks(doc: Document, fixed: list[Words], marks: _Marks) -> tuple[list[_Block], int, list[str]]:
    blocks: list[_Block] = []
    current: _Block | None = None
    pause: int | None = None
    edge = False
    paragraph = False
    waiting: list[tuple[str, int]] = []  # marks before the next block's first word, with the pause before each

    def opened(style: Style) -> _Block:
        nonlocal pause, edge, paragraph, waiting
        before = pause if pause is not None else (PARAGRAPH_PAUSE_MS if paragraph and blocks else None)
        for char, so_far in waiting:  # a mark in a break lies that far before the words
            marks.ms[ord(char) - MARK] = (pause or 0) - so_far
        last = "".join(blocks[-1].text) if blocks else ""
        continues = bool(blocks) and not edge and not _SENTENCE_DONE.search(_plain(last))
        block = _Block(style, before, continues, [c for c, _ in waiting])
        pause, edge, paragraph, waiting = None, False, False, []
        blocks.append(block)
        return block

    for item in doc.items:
        if isinstance(item, Words):
            if not item.fixed and not item.spoken.strip():  # spaces between elements: no span of their own
                if current is not None:
                    current.text.append(" ")
                continue
            if current is None or current.style != item.style:
                current = opened(item.style)
            if item.fixed:  # held by one character, and as many letters as it says (for the length estimates)
                current.text.append(chr(FIXED + len(fixed)) + "x" * _weight(item))
                fixed.append(item)
            else:
                current.text.append(item.spoken)
        elif isinstance(item, Mark):
            char = marks.add(item.name)
            if current is not None:
                current.text.append(char)
            else:
                waiting.append((char, pause or 0))
        elif isinstance(item, Pause):
            current = None
            pause = (pause or 0) + item.ms
        elif isinstance(item, Edge):
            current = None
            edge = True
            paragraph = paragraph or item.paragraph
    for char, so_far in waiting:  # marks after the last words: that far into the closing pause
        marks.ms[ord(char) - MARK] = so_far
    return blocks, pause or 0, [c for c, _ in waiting]


def _weight(item: Words) -> int:
    return sum(ch.isalnum() for ch in PHONEME_LINK.sub(r"\1", item.spoken))


def _plain(text: str) -> str:
    return PRIVATE.sub("", text)


def _expand(piece: str, fixed: list[Words], spoken: bool) -> str:
    """A piece with its fixed spans as said (between OPEN and CLOSE) or as written, and (as written) no marks."""
    out: list[str] = []
    i = 0
    while i < len(piece):
        code = ord(piece[i])
        if FIXED <= code < FIXED + len(fixed):
            item = fixed[code - FIXED]
            out.append(OPEN + item.spoken + CLOSE if spoken else item.shown)
            i += 1 + _weight(item)
            continue
        if not (MARK <= code < FIXED and not spoken):
            out.append(piece[i])
        i += 1
    return "".join(out)


def _has_words(spoken: str) -> bool:
    return any(ch.isalnum() for ch in PHONEME_LINK.sub(r"\1", _plain(spoken)))


def build(doc: Document, cutting: Segmenting) -> PreparedText:
    fixed: list[Words] = []
    marks = _Marks()
    blocks, tail_pause, tail_marks = _blocks(doc, fixed, marks)
    segments: list[str] = []
    shown: list[str] = []
    styles: list[SegmentStyle] = []
    continued: set[int] = set()
    carry = ""  # marks of a piece with nothing to say, for the next one
    carry_pause: int | None = None  # the pause before a block that said nothing, for the next one
    for block in blocks:
        text = re.sub(r"[ \t\n]+", " ", "".join(block.text)).strip()
        pieces, inside = segment_text(text, cutting.pack)
        opening = True  # the block's first piece with words takes its pause and its place in the sentence
        pause = block.pause_ms
        if carry_pause is not None:
            pause, carry_pause = carry_pause + (pause or 0), None
        for j, piece in enumerate(pieces):
            spoken = _expand(piece, fixed, spoken=True)
            if not _has_words(spoken):
                carry += "".join(c for c in piece if MARK <= ord(c) < FIXED)
                punctuation = _plain(piece).strip()
                if segments and punctuation and _LEADING_PUNCTUATION.fullmatch(punctuation):
                    segments[-1] += punctuation  # "." after a span said another way ends the sentence before
                    shown[-1] += punctuation
                continue
            lead = _LEADING_PUNCTUATION.match(spoken)
            if lead and segments:
                segments[-1] += lead.group(1)
                shown[-1] += lead.group(1)
                spoken = spoken[lead.end() :]
                piece = _LEADING_PUNCTUATION.sub("", piece, count=1)
            style = block.style
            volume = SILENT_DB if style.volume_db == -math.inf else min(MAX_GAIN_DB, max(SILENT_DB, style.volume_db))
            styles.append(
                SegmentStyle(
                    pause_ms=pause if opening else None,
                    voice=style.voice,
                    rate=style.rate,
                    volume_db=volume,
                    pitch=style.pitch,
                    lang=style.lang,
                )
            )
            if segments and ((opening and block.continues) or (not opening and j in inside)):
                continued.add(len(segments))
            opening = False
            segments.append(carry + spoken)
            shown.append(re.sub(r"\s+", " ", _expand(piece, fixed, spoken=False)).strip())
            carry = ""
        if opening and pause is not None:  # the block said nothing: its pause goes on to the next words
            carry_pause = pause
    if not segments:
        raise SsmlError("there is nothing to say (no words outside the markup).")
    segments[-1] += carry
    tail_pause += carry_pause or 0
    if tail_pause or tail_marks:  # a break at the end, and marks after it (offset -1: that far into it)
        after = tuple((marks.names[ord(c) - MARK], -1, marks.ms[ord(c) - MARK]) for c in tail_marks)
        styles[-1] = replace(styles[-1], after_ms=tail_pause, marks=after)
    return PreparedText(
        text=doc_text(doc),
        segments=tuple(segments),
        continued=frozenset(continued),
        styles=tuple(styles),
        shown=tuple(shown),
        spoken_chars=doc.billed,
        mark_names=tuple(marks.names),
        mark_ms=tuple(marks.ms),
        voice_places=tuple((name, line, column) for name, (line, column) in doc.voices.items()),
    )


def doc_text(doc: Document) -> str:
    """The text as written: its words, a space where a sentence, paragraph or break parts them."""
    said = "".join(i.shown if isinstance(i, Words) else "" if isinstance(i, Mark) else " " for i in doc.items)
    return re.sub(r"\s+", " ", said).strip()


def prepare_ssml(
    text: str,
    model: str,
    tags: frozenset[str],
    languages: tuple[str, ...],
    phonemes: frozenset[str],
    cutting: Segmenting,
) -> PreparedText:
    """`text` (SSML) checked for a model (`phonemes`: the symbols it reads, none for a model that
    reads text) and cut into styled segments (marks and fixed spans still in the text: `finish`
    takes them out)."""
    doc = parse(text, model, phonemes, languages)
    spoken = doc_text(doc) + " " + " ".join(i.spoken for i in doc.items if isinstance(i, Words) and i.fixed)
    refuse_unknown_tags(spoken, tags, model)
    # The text outside <lang> spans is checked as plain text is (a span's xml:lang was checked by name).
    untagged = " ".join(i.spoken for i in doc.items if isinstance(i, Words) and not i.style.lang)
    refuse_other_languages(untagged, languages, model)
    return build(doc, cutting)


def _lexicon(lexicon: Callable[[str], str] | None, text: str) -> str:
    """`text` through the lexicons, without the characters this module gives meanings to (marks,
    spans: an alias cannot forge one)."""
    return text if lexicon is None else PRIVATE.sub("", lexicon(text))


def finish(text: PreparedText, lexicon: Callable[[str], str] | None = None) -> PreparedText:
    """The segments as the model reads them: the lexicons applied outside fixed spans, marks taken
    out of the text into each segment's style (by offset in the text left)."""
    segments, styles = [], []
    for segment, style in zip(text.segments, text.styles, strict=True):
        # The lexicons read the text between fixed spans and marks, which pass as they are.
        parts = re.split(f"({OPEN}.*?{CLOSE}|[\U000f0000-\U000fffff])", segment)
        joined = "".join(
            p[1:-1] if p.startswith(OPEN) else p if len(p) == 1 and MARK <= ord(p) < FIXED else _lexicon(lexicon, p)
            for p in parts
        )
        out: list[str] = []
        length = 0
        marks: list[tuple[str, int, int]] = []
        for ch in joined:
            code = ord(ch)
            if MARK <= code < FIXED:
                marks.append((text.mark_names[code - MARK], length, text.mark_ms[code - MARK] if not length else 0))
                continue
            if ch.isspace():
                if not out or out[-1] == " ":
                    continue
                ch = " "
            out.append(ch)
            length += 1
        spoken = "".join(out).rstrip()
        marks = [(n, min(o, len(spoken)), ms) for n, o, ms in marks]
        segments.append(spoken)
        styles.append(replace(style, marks=tuple(marks) + style.marks))
    return replace(text, segments=tuple(segments), styles=tuple(styles))
