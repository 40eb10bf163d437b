"""Captions of generated speech: one cue per sentence segment, timed from the audio itself.

ChatTTS has no alignment, so nothing finer than a segment is claimed: a segment's start is the
first sample of its audio (after the pause that separates it from the one before) and its end is
its last sample. Those are exact, not estimates. Times are seconds from the start of the audio.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from inference.text import TAG

FORMATS = ("json", "srt", "vtt")
CONTENT_TYPES = {"json": "application/json", "srt": "application/x-subrip", "vtt": "text/vtt"}


@dataclass(frozen=True)
class Caption:
    text: str
    start: float  # seconds
    end: float

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict) -> Caption:
        return cls(str(value["text"]), float(value["start"]), float(value["end"]))


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
    return " ".join(TAG.sub(" ", text).split()).replace("-->", "->")


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
