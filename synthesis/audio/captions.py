"""Captions of generated speech: one cue per sentence segment, timed from the audio itself, and
each word's time where the engine knows it.

A segment's start is the first sample of its audio (after the pause that separates it from the one
before) and its end is its last sample: exact, not estimates. Kokoro predicts every phoneme's
duration, so its segments carry `words` (each word's start and end, from those durations, on the
audio as sent); ChatTTS has no alignment, so nothing finer than a segment is claimed (`words` is
absent). Times are seconds from the start of the audio. SRT and WebVTT cues stay per segment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inference.text.preparation import PHONEME_LINK, TAG, joiner

FORMATS = ("json", "srt", "vtt")
CONTENT_TYPES = {"json": "application/json", "srt": "application/x-subrip", "vtt": "text/vtt"}


@dataclass(frozen=True)
class Word:
    text: str
    start: float  # seconds
    end: float

    def as_dict(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Mark:
    """An SSML `<mark name>`: when it falls in the audio (approximate: inside a segment of an engine
    without word timings, placed by the characters before it)."""

    name: str
    time: float  # seconds
    approximate: bool = False

    def as_dict(self) -> dict:
        body: dict = {"name": self.name, "time": self.time}
        if self.approximate:
            body["approximate"] = True
        return body


@dataclass(frozen=True)
class Caption:
    text: str
    start: float  # seconds
    end: float
    words: tuple[Word, ...] | None = None  # None: the engine gives no word timings
    marks: tuple[Mark, ...] = ()  # SSML's marks in it

    def as_dict(self) -> dict:
        body: dict = {"text": self.text, "start": self.start, "end": self.end}
        if self.words is not None:
            body["words"] = [w.as_dict() for w in self.words]
        if self.marks:
            body["marks"] = [m.as_dict() for m in self.marks]
        return body

    @classmethod
    def from_dict(cls, value: dict) -> Caption:
        words = value.get("words")
        return cls(
            str(value["text"]),
            float(value["start"]),
            float(value["end"]),
            None if words is None else tuple(Word(str(w["text"]), float(w["start"]), float(w["end"])) for w in words),
            tuple(
                Mark(str(m["name"]), float(m["time"]), bool(m.get("approximate", False)))
                for m in value.get("marks", ())
            ),
        )

    def shifted(self, seconds: float) -> Caption:
        """The caption where its audio falls `seconds` later (a piece inside a longer utterance)."""
        words = (
            None
            if self.words is None
            else tuple(Word(w.text, round(w.start + seconds, 3), round(w.end + seconds, 3)) for w in self.words)
        )
        marks = tuple(Mark(m.name, round(m.time + seconds, 3), m.approximate) for m in self.marks)
        return Caption(self.text, round(self.start + seconds, 3), round(self.end + seconds, 3), words, marks)

    def joined(self, rest: Caption) -> Caption:
        """This caption and the rest of its sentence (the next segment's) as one caption."""
        words = None if self.words is None or rest.words is None else self.words + rest.words
        text = f"{self.text}{joiner(self.text, rest.text)}{rest.text}"
        return Caption(text, self.start, rest.end, words, self.marks + rest.marks)

    def shown_as(self, text: str) -> Caption:
        """The same timings under another text (a request's own, where lexicons changed what was spoken)."""
        return Caption(text, self.start, self.end, self.words, self.marks)


def _clock(seconds: float, separator: str) -> str:
    ms = max(0, round(seconds * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{ms:03d}"


def _spoken(captions: Iterable[Caption]) -> list[Caption]:
    """Cues worth showing: a segment that produced no audio has nothing to caption."""
    return [c for c in captions if c.end > c.start]


def srt(captions: Iterable[Caption]) -> str:
    cues = [
        f"{i}\n{_clock(c.start, ',')} --> {_clock(c.end, ',')}\n{_cue_text(c.text)}\n"
        for i, c in enumerate(_spoken(captions), 1)
    ]
    return "\n".join(cues)


def vtt(captions: Iterable[Caption]) -> str:
    cues = [
        f"{_clock(c.start, '.')} --> {_clock(c.end, '.')}\n{_vtt_escape(_cue_text(c.text))}\n"
        for c in _spoken(captions)
    ]
    return "WEBVTT\n\n" + "\n".join(cues)


def _cue_text(text: str) -> str:
    # Inline control tags ([laugh], [uv_break]) are not words to show; a blank line ends a cue in
    # both formats, and "-->" would read as a timing line in WebVTT.
    return " ".join(TAG.sub(" ", PHONEME_LINK.sub(r"\1", text)).split()).replace("-->", "->")


def _vtt_escape(text: str) -> str:
    # WebVTT cue text reads "<" as a tag and "&" as an entity.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render(captions: list[Caption], fmt: str) -> str | dict:
    """`fmt` in FORMATS: the SRT or WebVTT text, or the JSON document."""
    if fmt == "srt":
        return srt(captions)
    if fmt == "vtt":
        return vtt(captions)
    return {"segments": [c.as_dict() for c in captions]}
