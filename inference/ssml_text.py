"""An SSML document (`inference.ssml`) cut into segments, each with how it is said (`SegmentStyle`).

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

from .ssml import PARAGRAPH_PAUSE_MS, Document, Edge, Mark, Pause, Style, Words, parse
from .text import PHONEME_LINK, PreparedText, Segmenting, refuse_other_languages, refuse_unknown_tags, segment_text

MARK = 0xF0000  # mark n is chr(MARK + n) in the text until `finish`
FIXED = 0x100000  # fixed span n is chr(FIXED + n) while sentences are cut
OPEN, CLOSE = "\U0010fffe", "\U0010fffd"  # a fixed span in a segment until `finish`
SILENT_DB = -120.0  # volume "silent" (kept as a number: JSON has no -inf)
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
    marks: tuple[tuple[str, int], ...] = ()  # (name, offset in the segment's text); -1: after `after_ms`

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
        return cls(**fields, marks=tuple((str(n), int(o)) for n, o in value.get("marks", ())))

    @property
    def prosody(self) -> Style:
        return Style(self.voice, self.rate, self.volume_db, self.pitch, self.lang)


@dataclass
class _Block:
    style: Style
    pause_ms: int | None
    continues: bool  # it goes on with the sentence before
    text: list[str] = field(default_factory=list)  # with FIXED and MARK characters


def _blocks(doc: Document, fixed: list[Words], names: list[str]) -> tuple[list[_Block], int, list[str]]:
    blocks: list[_Block] = []
    current: _Block | None = None
    pause: int | None = None
    edge = False
    paragraph = False
    waiting: list[str] = []  # marks before the next block's first word

    def opened(style: Style) -> _Block:
        nonlocal pause, edge, paragraph, waiting
        before = pause if pause is not None else (PARAGRAPH_PAUSE_MS if paragraph and blocks else None)
        last = "".join(blocks[-1].text) if blocks else ""
        continues = bool(blocks) and not edge and not _SENTENCE_DONE.search(_plain(last))
        block = _Block(style, before, continues, list(waiting))
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
            if item.fixed:
                current.text.append(chr(FIXED + len(fixed)))
                fixed.append(item)
            else:
                current.text.append(item.spoken)
        elif isinstance(item, Mark):
            names.append(item.name)
            (current.text if current is not None else waiting).append(chr(MARK + len(names) - 1))
        elif isinstance(item, Pause):
            current = None
            pause = (pause or 0) + item.ms
        elif isinstance(item, Edge):
            current = None
            edge = True
            paragraph = paragraph or item.paragraph
    return blocks, pause or 0, waiting


def _plain(text: str) -> str:
    return re.sub("[\U000f0000-\U0010ffff]", "", text)


def _expand(piece: str, fixed: list[Words], spoken: bool) -> str:
    def one(ch: str) -> str:
        code = ord(ch)
        if code >= FIXED and code - FIXED < len(fixed):
            item = fixed[code - FIXED]
            return OPEN + item.spoken + CLOSE if spoken else item.shown
        if code >= MARK and not spoken:
            return ""
        return ch

    return re.sub("[\U000f0000-\U0010ffff]", lambda m: one(m.group(0)), piece)


def _has_words(spoken: str) -> bool:
    return any(ch.isalnum() for ch in PHONEME_LINK.sub(r"\1", _plain(spoken)))


def build(doc: Document, cutting: Segmenting) -> PreparedText:
    fixed: list[Words] = []
    names: list[str] = []
    blocks, tail_pause, tail_marks = _blocks(doc, fixed, names)
    segments: list[str] = []
    shown: list[str] = []
    styles: list[SegmentStyle] = []
    continued: set[int] = set()
    carry = ""  # marks of a piece with nothing to say, for the next one
    for block in blocks:
        text = re.sub(r"[ \t\n]+", " ", "".join(block.text)).strip()
        first = cutting.first_piece_seconds if not segments else 0.0
        pieces, inside = segment_text(text, cutting.pack, first)
        opening = True  # the block's first piece with words takes its pause and its place in the sentence
        for j, piece in enumerate(pieces):
            spoken = _expand(piece, fixed, spoken=True)
            if not _has_words(spoken):
                carry += "".join(c for c in piece if MARK <= ord(c) < FIXED)
                continue
            lead = _LEADING_PUNCTUATION.match(spoken)
            if lead and segments:  # "." after a span said another way ends the sentence before
                segments[-1] += lead.group(1)
                spoken = spoken[lead.end() :]
                piece = _LEADING_PUNCTUATION.sub("", piece, count=1)
            style = block.style
            volume = SILENT_DB if style.volume_db == -math.inf else max(SILENT_DB, style.volume_db)
            styles.append(
                SegmentStyle(
                    pause_ms=block.pause_ms if opening else None,
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
    if not segments:
        raise_nothing()
    segments[-1] += carry
    if tail_pause or tail_marks:  # a break at the end, and marks after it (offset -1: after the pause)
        after = tuple((names[ord(c) - MARK], -1) for c in tail_marks)
        styles[-1] = replace(styles[-1], after_ms=tail_pause, marks=after)
    return PreparedText(
        text=doc_text(doc),
        segments=tuple(segments),
        continued=frozenset(continued),
        styles=tuple(styles),
        shown=tuple(shown),
        spoken_chars=doc.billed,
        mark_names=tuple(names),
    )


def raise_nothing() -> None:
    from .ssml import SsmlError  # noqa: PLC0415

    raise SsmlError("there is nothing to say (no words outside the markup).")


def doc_text(doc: Document) -> str:
    return re.sub(r"\s+", " ", "".join(i.shown for i in doc.items if isinstance(i, Words))).strip()


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
    if not doc.lang and not any(isinstance(i, Words) and i.style.lang for i in doc.items):
        refuse_other_languages(spoken, languages, model)
    return build(doc, cutting)


def finish(text: PreparedText, lexicon: Callable[[str], str] | None = None) -> PreparedText:
    """The segments as the model reads them: the lexicons applied outside fixed spans, marks taken
    out of the text into each segment's style (by offset in the text left)."""
    segments, styles = [], []
    for segment, style in zip(text.segments, text.styles, strict=True):
        parts = re.split(f"({OPEN}.*?{CLOSE})", segment)
        joined = "".join(p[1:-1] if p.startswith(OPEN) else (lexicon(p) if lexicon is not None else p) for p in parts)
        out: list[str] = []
        length = 0
        marks: list[tuple[str, int]] = []
        for ch in joined:
            code = ord(ch)
            if MARK <= code < FIXED:
                marks.append((text.mark_names[code - MARK], length))
                continue
            if ch.isspace():
                if not out or out[-1] == " ":
                    continue
                ch = " "
            out.append(ch)
            length += 1
        spoken = "".join(out).rstrip()
        marks = [(n, min(o, len(spoken))) for n, o in marks]
        segments.append(spoken)
        styles.append(replace(style, marks=tuple(marks) + style.marks))
    return replace(text, segments=tuple(segments), styles=tuple(styles))
